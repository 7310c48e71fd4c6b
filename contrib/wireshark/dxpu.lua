-- dxpu.lua: Wireshark dissector for dxpu frames (PCIe TLPs carried between
-- dxpu bridges) and for NetTLP datagrams.
--
-- Load it for one run:   tshark -X lua_script:dxpu.lua -r capture.pcap
-- or install it:         cp dxpu.lua ~/.local/lib/wireshark/plugins/
--
-- What it dissects (formats: `go doc github.com/dxpu/dxpu/tlp/encap` and
-- `go doc github.com/dxpu/dxpu/tlp`):
--   * dxpu version 1 over raw Ethernet, EtherType 0x88B5 (802.1Q/802.1ad
--     tags are handled by Wireshark's VLAN dissector), and over IPv4/UDP to
--     destination port 8855 (preference "dxpu.udp_port") or any port where
--     the payload reads as a dxpu header (heuristic, preference
--     "dxpu.heuristic"): the 40-byte
--     header, the TLP length table and the TLPs batched in the body, or the
--     control message of a CONTROL frame (HELLO, HELLO-ACK, KEEPALIVE,
--     KEEPALIVE-ACK, RESET);
--   * sealed frames (flag SEALED, bridge/seal): the clear header and the
--     seal header (epoch, kind, echo, generation, packet number; the
--     sender's boot ID under the handshake key), the
--     encrypted body and the tag under dxpu.seal.*; a GMAC frame's body is
--     in clear and shows as a plain frame's; `dxpu pcap unseal` with the
--     bridges' --key-log opens the TLPs of GCM frames;
--   * a UDP segmentation-offload send captured on the sending host before
--     segmentation (tcpdump, dumpcap): several dxpu datagrams back to back in
--     one UDP payload, each shown as its own, with a note (dxpu.expert.gso);
--     `dxpu pcap capture` records them as the datagrams they leave as;
--   * NetTLP (protocol "nettlp"): UDP to or from ports 0x3000-0x30ff,
--     6-byte header (sequence, timestamp), one TLP;
--   * each TLP field by field under dxpu.tlp.* (DW0 fields, IDs, 10-bit tag,
--     byte enables, 32/64-bit address and PH, config target and register,
--     message code and routing, completion status, byte count and lower
--     address, data, ECRC).
--
-- The filters are dxpu, nettlp and dxpu.tlp.*, e.g.
--   dxpu.type == 5                        control messages
--   dxpu.tlp.kind == "CplD" && dxpu.tlp.tag == 0x105
--   dxpu.tlp.address >= 0xf0000000
--
-- Errors are expert infos, never Lua errors: a frame too short for its
-- header, a bad version, message type, TLP count, body length or TLP length
-- table, a bad control message, a NetTLP datagram without a TLP, and a TLP
-- whose Fmt/Type is reserved or whose size disagrees with its header. The
-- checks mirror encap.ParseFrame and encap.ParseControl; the PCIe rules on
-- field values (byte enables, 4 KiB crossings, ECRC, ...) are left to
-- `dxpu tlp decode --pcap`. Frames cut by the capture's snap length show
-- what is there and a note.
--
-- Field values follow the wire, not the interpretation: dxpu.tlp.length is
-- the 10-bit field (0 means 1024 DW where Length counts DWs) and
-- dxpu.tlp.byte_count the 12-bit field (0 means 4096); the label says so.
--
-- Tested with Wireshark 4.0 (Lua 5.2). It uses no bitwise operators (field
-- masks, TvbRange:bitfield and arithmetic instead), so the Lua 5.3/5.4 of
-- later Wireshark releases should load it unchanged.

local HEADER_LEN = 40
local SEC_HEADER_LEN = 12
local TAG_LEN = 16
local SEAL_OVERHEAD = SEC_HEADER_LEN + TAG_LEN
-- under the handshake key (kind bit 7) the security header ends with the
-- sender's 8-byte boot ID, part of the frame's nonce
local BOOT_ID_LEN = 8
local HS_SEC_HEADER_LEN = SEC_HEADER_LEN + BOOT_ID_LEN
local HS_SEAL_OVERHEAD = HS_SEC_HEADER_LEN + TAG_LEN
local CONTROL_LEN = 12
local HELLO_LEN = 40
local NETTLP_HEADER_LEN = 6

-- Loaded twice (an installed copy and -X lua_script:, or two plugin
-- folders), Wireshark refuses the second Proto("dxpu") ("there cannot be
-- two protocols with the same description"): the copy loaded first serves,
-- the other returns here. (Each file has its own globals, so a flag would
-- not do.)
local loaded_once, dxpu = pcall(Proto, "dxpu", "dxpu TLP encapsulation")
if not loaded_once then
	return
end
local nettlp = Proto("nettlp", "NetTLP")

dxpu.prefs.udp_port = Pref.uint("UDP port", 8855, "UDP destination port of dxpu frames over IPv4")
dxpu.prefs.heuristic = Pref.bool("Find dxpu on any UDP port", true,
	"Recognise dxpu datagrams to other ports by their header (version 1, message type, lengths)")
nettlp.prefs.ports = Pref.range("UDP ports", "12288-12543",
	"UDP ports of NetTLP datagrams (0x3000 + tag)", 65535)

-- Value names ---------------------------------------------------------------

local msg_types = { [1] = "TLP", [2] = "ACK", [3] = "NAK", [4] = "CREDIT", [5] = "CONTROL" }
local ctl_types = { [1] = "HELLO", [2] = "HELLO-ACK", [3] = "KEEPALIVE", [4] = "KEEPALIVE-ACK", [5] = "RESET" }
local roles = { [1] = "host", [2] = "gpu" }
local seal_modes = { [1] = "AES-256-GCM", [2] = "AES-256-GMAC" }
local reset_reasons = { [1] = "administrative", [2] = "unknown session", [3] = "protocol error", [4] = "link down" }
local fmt_names = {
	[0] = "3DW header, no data", [1] = "4DW header, no data",
	[2] = "3DW header, data", [3] = "4DW header, data", [4] = "TLP prefix",
}
local at_names = { [0] = "untranslated", [1] = "translation request", [2] = "translated", [3] = "reserved" }
local status_names = { [0] = "SC", [1] = "UR", [2] = "CRS", [4] = "CA" }
local routing_names = {
	[0] = "to root complex", [1] = "by address", [2] = "by ID",
	[3] = "broadcast from root complex", [4] = "local", [5] = "gathered to root complex",
}
local message_names = {
	[0x00] = "Unlock", [0x10] = "LTR", [0x12] = "OBFF", [0x14] = "PM_Active_State_Nak",
	[0x18] = "PM_PME", [0x19] = "PME_Turn_Off", [0x1b] = "PME_TO_Ack",
	[0x20] = "Assert_INTA", [0x21] = "Assert_INTB", [0x22] = "Assert_INTC", [0x23] = "Assert_INTD",
	[0x24] = "Deassert_INTA", [0x25] = "Deassert_INTB", [0x26] = "Deassert_INTC", [0x27] = "Deassert_INTD",
	[0x30] = "ERR_COR", [0x31] = "ERR_NONFATAL", [0x33] = "ERR_FATAL", [0x40] = "Ignored",
	[0x50] = "Set_Slot_Power_Limit", [0x52] = "PTM Request", [0x53] = "PTM Response",
	[0x7e] = "Vendor_Defined Type 0", [0x7f] = "Vendor_Defined Type 1",
}

-- Fields --------------------------------------------------------------------

local F = {
	-- dxpu fixed header
	version = ProtoField.uint8("dxpu.version", "Version", base.DEC, nil, 0xf0),
	flags = ProtoField.uint8("dxpu.flags", "Flags", base.HEX, nil, 0x0f),
	flag_ack = ProtoField.bool("dxpu.flags.ack", "ACK valid", 8, nil, 0x01),
	flag_credit = ProtoField.bool("dxpu.flags.credit", "CREDIT valid", 8, nil, 0x02),
	flag_sack = ProtoField.bool("dxpu.flags.sack", "SACK valid", 8, nil, 0x04),
	flag_sealed = ProtoField.bool("dxpu.flags.sealed", "SEALED", 8, nil, 0x08),
	type = ProtoField.uint8("dxpu.type", "Message type", base.DEC, msg_types),
	pair = ProtoField.uint24("dxpu.pair", "Pair ID", base.DEC),
	count = ProtoField.uint8("dxpu.count", "TLP count", base.DEC),
	body_len = ProtoField.uint16("dxpu.body_len", "Body length", base.DEC),
	seq = ProtoField.uint32("dxpu.seq", "Seq", base.DEC),
	ack = ProtoField.uint32("dxpu.ack", "Ack", base.DEC),
	sack = ProtoField.uint32("dxpu.sack", "SACK bitmap", base.HEX),
	limit_ph = ProtoField.uint16("dxpu.limit.ph", "PH limit", base.DEC),
	limit_nph = ProtoField.uint16("dxpu.limit.nph", "NPH limit", base.DEC),
	limit_cplh = ProtoField.uint16("dxpu.limit.cplh", "CplH limit", base.DEC),
	infinite = ProtoField.uint8("dxpu.infinite", "Infinite credits", base.HEX),
	inf_ph = ProtoField.bool("dxpu.infinite.ph", "PH infinite", 8, nil, 0x01),
	inf_pd = ProtoField.bool("dxpu.infinite.pd", "PD infinite", 8, nil, 0x02),
	inf_nph = ProtoField.bool("dxpu.infinite.nph", "NPH infinite", 8, nil, 0x04),
	inf_npd = ProtoField.bool("dxpu.infinite.npd", "NPD infinite", 8, nil, 0x08),
	inf_cplh = ProtoField.bool("dxpu.infinite.cplh", "CplH infinite", 8, nil, 0x10),
	inf_cpld = ProtoField.bool("dxpu.infinite.cpld", "CplD infinite", 8, nil, 0x20),
	reserved = ProtoField.uint8("dxpu.reserved", "Reserved", base.HEX),
	limit_pd = ProtoField.uint32("dxpu.limit.pd", "PD limit (16-byte units)", base.DEC),
	limit_npd = ProtoField.uint32("dxpu.limit.npd", "NPD limit (16-byte units)", base.DEC),
	limit_cpld = ProtoField.uint32("dxpu.limit.cpld", "CplD limit (16-byte units)", base.DEC),
	tlp_len = ProtoField.uint16("dxpu.tlp_len", "TLP length", base.DEC),
	body = ProtoField.bytes("dxpu.body", "Body"),

	-- security header and tag of a sealed frame (bridge/seal)
	seal = ProtoField.none("dxpu.seal", "Seal"),
	seal_epoch = ProtoField.uint8("dxpu.seal.epoch", "Key epoch (low 8 bits)", base.DEC),
	seal_kind = ProtoField.uint8("dxpu.seal.kind", "Kind", base.HEX),
	seal_mode = ProtoField.uint8("dxpu.seal.mode", "Mode", base.DEC, seal_modes, 0x03),
	seal_handshake = ProtoField.bool("dxpu.seal.handshake", "Handshake key", 8, nil, 0x80),
	seal_kind_reserved = ProtoField.uint8("dxpu.seal.kind_reserved", "Reserved", base.HEX, nil, 0x7c),
	seal_echo = ProtoField.uint8("dxpu.seal.echo", "Echo (oldest epoch opened, low 8 bits)", base.DEC),
	seal_generation = ProtoField.uint8("dxpu.seal.generation", "Key generation (low 8 bits)", base.DEC),
	seal_pn = ProtoField.uint64("dxpu.seal.packet_number", "Packet number", base.DEC),
	seal_boot_id = ProtoField.bytes("dxpu.seal.boot_id", "Boot ID (the sender's, random per start; in the nonce)"),
	seal_ciphertext = ProtoField.bytes("dxpu.seal.ciphertext", "Encrypted body"),
	seal_plaintext = ProtoField.bytes("dxpu.seal.plaintext", "Body (in clear, authenticated)"),
	seal_plain_len = ProtoField.uint16("dxpu.seal.body_len", "Plaintext body length", base.DEC),
	seal_tag = ProtoField.bytes("dxpu.seal.tag", "Tag"),

	-- control messages
	ctl = ProtoField.none("dxpu.ctl", "Control message"),
	ctl_type = ProtoField.uint8("dxpu.ctl.type", "Control type", base.DEC, ctl_types),
	ctl_version = ProtoField.uint8("dxpu.ctl.version", "Control version", base.DEC),
	ctl_role = ProtoField.uint8("dxpu.ctl.role", "Role", base.DEC, roles),
	ctl_tag_bits = ProtoField.uint8("dxpu.ctl.tag_bits", "Tag bits", base.DEC),
	ctl_reason = ProtoField.uint8("dxpu.ctl.reason", "Reset reason", base.DEC, reset_reasons),
	ctl_probe = ProtoField.uint8("dxpu.ctl.probe", "Probe", base.DEC),
	ctl_byte3 = ProtoField.uint8("dxpu.ctl.byte3", "Type-specific byte", base.HEX),
	ctl_session = ProtoField.uint32("dxpu.ctl.session", "Session", base.HEX),
	ctl_peer_session = ProtoField.uint32("dxpu.ctl.peer_session", "Peer session", base.HEX),
	ctl_window = ProtoField.uint16("dxpu.ctl.window", "Reorder window (TLPs)", base.DEC),
	ctl_max_tlp = ProtoField.uint16("dxpu.ctl.max_tlp", "Max TLP (bytes)", base.DEC),
	ctl_isn = ProtoField.uint32("dxpu.ctl.isn", "Initial sequence number", base.DEC),
	ctl_ph = ProtoField.uint16("dxpu.ctl.credit.ph", "PH initial credits", base.DEC),
	ctl_nph = ProtoField.uint16("dxpu.ctl.credit.nph", "NPH initial credits", base.DEC),
	ctl_cplh = ProtoField.uint16("dxpu.ctl.credit.cplh", "CplH initial credits", base.DEC),
	ctl_infinite = ProtoField.uint8("dxpu.ctl.infinite", "Infinite credits", base.HEX),
	ctl_inf_ph = ProtoField.bool("dxpu.ctl.infinite.ph", "PH infinite", 8, nil, 0x01),
	ctl_inf_pd = ProtoField.bool("dxpu.ctl.infinite.pd", "PD infinite", 8, nil, 0x02),
	ctl_inf_nph = ProtoField.bool("dxpu.ctl.infinite.nph", "NPH infinite", 8, nil, 0x04),
	ctl_inf_npd = ProtoField.bool("dxpu.ctl.infinite.npd", "NPD infinite", 8, nil, 0x08),
	ctl_inf_cplh = ProtoField.bool("dxpu.ctl.infinite.cplh", "CplH infinite", 8, nil, 0x10),
	ctl_inf_cpld = ProtoField.bool("dxpu.ctl.infinite.cpld", "CplD infinite", 8, nil, 0x20),
	ctl_reserved = ProtoField.uint8("dxpu.ctl.reserved", "Reserved", base.HEX),
	ctl_pd = ProtoField.uint32("dxpu.ctl.credit.pd", "PD initial credits (16-byte units)", base.DEC),
	ctl_npd = ProtoField.uint32("dxpu.ctl.credit.npd", "NPD initial credits (16-byte units)", base.DEC),
	ctl_cpld = ProtoField.uint32("dxpu.ctl.credit.cpld", "CplD initial credits (16-byte units)", base.DEC),

	-- one TLP
	tlp = ProtoField.none("dxpu.tlp", "TLP"),
	tlp_index = ProtoField.uint8("dxpu.tlp.index", "Index in frame", base.DEC),
	tlp_seq = ProtoField.uint32("dxpu.tlp.seq", "Seq", base.DEC),
	tlp_kind = ProtoField.string("dxpu.tlp.kind", "Kind"),
	tlp_fmt = ProtoField.uint8("dxpu.tlp.fmt", "Fmt", base.DEC, fmt_names, 0xe0),
	tlp_type = ProtoField.uint8("dxpu.tlp.type", "Type", base.HEX, nil, 0x1f),
	tlp_t9 = ProtoField.uint8("dxpu.tlp.t9", "T9 (tag bit 9)", base.DEC, nil, 0x80),
	tlp_tc = ProtoField.uint8("dxpu.tlp.tc", "TC", base.DEC, nil, 0x70),
	tlp_t8 = ProtoField.uint8("dxpu.tlp.t8", "T8 (tag bit 8)", base.DEC, nil, 0x08),
	tlp_attr = ProtoField.uint8("dxpu.tlp.attr", "Attr (1 NS, 2 RO, 4 IDO)", base.HEX),
	tlp_ido = ProtoField.bool("dxpu.tlp.attr.ido", "ID-based ordering", 8, nil, 0x04),
	tlp_ln = ProtoField.bool("dxpu.tlp.ln", "LN", 8, nil, 0x02),
	tlp_th = ProtoField.bool("dxpu.tlp.th", "TH", 8, nil, 0x01),
	tlp_td = ProtoField.bool("dxpu.tlp.td", "TD (ECRC present)", 8, nil, 0x80),
	tlp_ep = ProtoField.bool("dxpu.tlp.ep", "EP (poisoned)", 8, nil, 0x40),
	tlp_ro = ProtoField.bool("dxpu.tlp.attr.ro", "Relaxed ordering", 8, nil, 0x20),
	tlp_ns = ProtoField.bool("dxpu.tlp.attr.ns", "No snoop", 8, nil, 0x10),
	tlp_at = ProtoField.uint8("dxpu.tlp.at", "AT", base.DEC, at_names, 0x0c),
	tlp_length = ProtoField.uint16("dxpu.tlp.length", "Length field (DW)", base.DEC, nil, 0x03ff),
	tlp_requester = ProtoField.uint16("dxpu.tlp.requester_id", "Requester ID", base.HEX),
	tlp_completer = ProtoField.uint16("dxpu.tlp.completer_id", "Completer ID", base.HEX),
	tlp_target = ProtoField.uint16("dxpu.tlp.target_id", "Target ID", base.HEX),
	tlp_tag = ProtoField.uint16("dxpu.tlp.tag", "Tag", base.HEX),
	tlp_last_be = ProtoField.uint8("dxpu.tlp.last_be", "Last DW BE", base.HEX, nil, 0xf0),
	tlp_first_be = ProtoField.uint8("dxpu.tlp.first_be", "First DW BE", base.HEX, nil, 0x0f),
	tlp_address = ProtoField.uint64("dxpu.tlp.address", "Address", base.HEX),
	tlp_ph = ProtoField.uint8("dxpu.tlp.ph", "PH", base.DEC, nil, 0x03),
	tlp_register = ProtoField.uint16("dxpu.tlp.register", "Register (byte offset)", base.HEX),
	tlp_msg_code = ProtoField.uint8("dxpu.tlp.message_code", "Message code", base.HEX, message_names),
	tlp_routing = ProtoField.uint8("dxpu.tlp.routing", "Routing", base.DEC, routing_names, 0x07),
	tlp_msg_dw2 = ProtoField.uint32("dxpu.tlp.msg_dw2", "Message DW2", base.HEX),
	tlp_msg_dw3 = ProtoField.uint32("dxpu.tlp.msg_dw3", "Message DW3", base.HEX),
	tlp_status = ProtoField.uint8("dxpu.tlp.status", "Status", base.DEC, status_names, 0xe0),
	tlp_bcm = ProtoField.bool("dxpu.tlp.bcm", "BCM", 8, nil, 0x10),
	tlp_byte_count = ProtoField.uint16("dxpu.tlp.byte_count", "Byte Count field", base.DEC, nil, 0x0fff),
	tlp_lower_addr = ProtoField.uint8("dxpu.tlp.lower_address", "Lower Address", base.HEX, nil, 0x7f),
	tlp_data = ProtoField.bytes("dxpu.tlp.data", "Data"),
	tlp_ecrc = ProtoField.uint32("dxpu.tlp.ecrc", "ECRC", base.HEX),
}

local NF = {
	seq = ProtoField.uint16("nettlp.seq", "Sequence", base.DEC),
	timestamp = ProtoField.uint32("nettlp.timestamp", "Timestamp", base.HEX),
}

local fields = {}
for _, f in pairs(F) do fields[#fields + 1] = f end
dxpu.fields = fields
nettlp.fields = { NF.seq, NF.timestamp }

local function expert_err(abbr, text)
	return ProtoExpert.new(abbr, text, expert.group.MALFORMED, expert.severity.ERROR)
end

local E = {
	short = expert_err("dxpu.expert.short", "Frame too short for its header"),
	version = expert_err("dxpu.expert.version", "Unsupported dxpu version"),
	msg_type = expert_err("dxpu.expert.msg_type", "Unknown dxpu message type"),
	count = expert_err("dxpu.expert.count", "Bad TLP count"),
	body_len = expert_err("dxpu.expert.body_len", "Body length disagrees with the UDP length"),
	tlp_len = expert_err("dxpu.expert.tlp_len", "Bad TLP length table"),
	control = expert_err("dxpu.expert.control", "Bad control message"),
	seal = expert_err("dxpu.expert.seal", "Bad sealed frame"),
	nettlp = expert_err("dxpu.expert.nettlp", "Bad NetTLP datagram"),
	tlp = expert_err("dxpu.expert.tlp", "Malformed TLP"),
	truncated = ProtoExpert.new("dxpu.expert.truncated", "Cut by the capture's snap length",
		expert.group.SEQUENCE, expert.severity.NOTE),
	internal = ProtoExpert.new("dxpu.expert.internal", "Dissector bug",
		expert.group.UNDECODED, expert.severity.WARN),
	gso = ProtoExpert.new("dxpu.expert.gso", "Several dxpu datagrams in one UDP segmentation-offload send",
		expert.group.SEQUENCE, expert.severity.NOTE),
}
dxpu.experts = { E.short, E.version, E.msg_type, E.count, E.body_len, E.tlp_len, E.control, E.seal,
	E.nettlp, E.tlp, E.truncated, E.internal, E.gso }

-- TLP kinds -----------------------------------------------------------------

-- kind_of mirrors tlp.KindOf: the kind from Fmt and Type, nil when reserved.
local function kind_of(fmt, typ)
	if fmt > 3 then
		return nil
	end
	local data = fmt >= 2
	local four = fmt % 2 == 1
	if typ == 0 then
		return data and "MWr" or "MRd"
	elseif typ == 1 then
		return (not data) and "MRdLk" or nil
	elseif typ >= 16 and typ < 24 then
		if not four or typ - 16 > 5 then
			return nil
		end
		return data and "MsgD" or "Msg"
	end
	if four then
		if not data then
			return nil
		end
		return ({ [12] = "FetchAdd", [13] = "Swap", [14] = "CAS" })[typ]
	end
	local pairs3 = {
		[2] = { "IOWr", "IORd" }, [4] = { "CfgWr0", "CfgRd0" }, [5] = { "CfgWr1", "CfgRd1" },
		[10] = { "CplD", "Cpl" }, [11] = { "CplDLk", "CplLk" },
		[12] = { "FetchAdd", nil }, [13] = { "Swap", nil }, [14] = { "CAS", nil },
	}
	local p = pairs3[typ]
	if p == nil then
		return nil
	end
	if data then
		return p[1]
	end
	return p[2]
end

local function is_completion(k) return k == "Cpl" or k == "CplD" or k == "CplLk" or k == "CplDLk" end
local function is_message(k) return k == "Msg" or k == "MsgD" end
local function is_config(k) return k == "CfgRd0" or k == "CfgWr0" or k == "CfgRd1" or k == "CfgWr1" end
local function is_io(k) return k == "IORd" or k == "IOWr" end

-- bdf formats a PCI ID the way dxpu does: bb:dd.f in hex.
local function bdf(id)
	local bus = math.floor(id / 256)
	local dev = math.floor((id % 256) / 8)
	return string.format("%02x:%02x.%x", bus, dev, id % 8)
end

local function add_id(tree, field, r, what)
	local id = r:uint()
	tree:add(field, r):set_text(string.format("%s: %s (0x%04x)", what, bdf(id), id))
end

-- hex64 formats a UInt64 as 0x... without leading zeros.
local function hex64(v)
	local s = v:tohex():gsub("^0+", "")
	if s == "" then s = "0" end
	return "0x" .. s
end

-- Dissection of one TLP -----------------------------------------------------

-- dissect_tlp shows the TLP whose declared slot is `slot` bytes at `off` in
-- tvb (the frame may hold fewer). It returns a short summary for the Info
-- column.
local function dissect_tlp(tvb, off, slot, tree, index, seq)
	local avail = math.max(0, math.min(slot, tvb:len() - off))
	local t
	if avail > 0 then
		t = tree:add(F.tlp, tvb(off, avail))
	else
		t = tree:add(F.tlp)
	end
	t:add(F.tlp_index, index):set_generated()
	if seq ~= nil then
		t:add(F.tlp_seq, seq):set_generated()
	end
	if avail < 4 then
		t:add_proto_expert_info(E.tlp, string.format("TLP header cut: %d of %d bytes present", avail, slot))
		t:append_text(" (cut)")
		return "[TLP cut by the capture]"
	end
	local b0, b1, b2 = tvb(off, 1), tvb(off + 1, 1), tvb(off + 2, 1)
	local fmt, typ = b0:bitfield(0, 3), b0:bitfield(3, 5)
	local kind = kind_of(fmt, typ)
	t:add(F.tlp_kind, b0, kind or "Invalid")
	t:add(F.tlp_fmt, b0)
	t:add(F.tlp_type, b0)
	t:add(F.tlp_t9, b1)
	t:add(F.tlp_tc, b1)
	t:add(F.tlp_t8, b1)
	local ido, ro, ns = b1:bitfield(5, 1), b2:bitfield(2, 1), b2:bitfield(3, 1)
	local attr = t:add(F.tlp_attr, tvb(off + 1, 2), ns + 2 * ro + 4 * ido)
	attr:add(F.tlp_ido, b1)
	attr:add(F.tlp_ro, b2)
	attr:add(F.tlp_ns, b2)
	t:add(F.tlp_ln, b1)
	t:add(F.tlp_th, b1)
	t:add(F.tlp_td, b2)
	t:add(F.tlp_ep, b2)
	t:add(F.tlp_at, b2)
	local lenfield = tvb(off + 2, 2):bitfield(6, 10)
	local li = t:add(F.tlp_length, tvb(off + 2, 2))
	if fmt == 4 then
		t:add_proto_expert_info(E.tlp, "TLP prefix (Fmt 100): not a TLP of its own")
		return "[TLP prefix]"
	end
	if kind == nil then
		t:add_proto_expert_info(E.tlp, string.format("reserved Fmt/Type %d/0x%02x", fmt, typ))
		return "[reserved Fmt/Type]"
	end
	t:append_text(": " .. kind)
	local four = fmt % 2 == 1
	local hlen = four and 16 or 12
	local data = fmt >= 2
	local dws = lenfield
	if dws == 0 then dws = 1024 end
	if lenfield == 0 and kind ~= "Cpl" and kind ~= "CplLk" and kind ~= "Msg" then
		li:append_text(" (1024 DW)")
	end
	if avail < hlen then
		t:add_proto_expert_info(E.tlp, string.format("%s header cut: %d of %d bytes present", kind, avail, hlen))
		return kind .. " [header cut by the capture]"
	end
	local td = b2:bitfield(0, 1) == 1
	local plen = data and 4 * dws or 0
	local declared = hlen + plen + (td and 4 or 0)
	local cut = avail < slot
	local malformed = (cut and avail > declared) or (not cut and slot ~= declared)
	if malformed then
		t:add_proto_expert_info(E.tlp, string.format(
			"%s: header %d + payload %d + digest %d = %d bytes declared, the frame gives it %d",
			kind, hlen, plen, td and 4 or 0, declared, slot))
	end
	local tag = b1:bitfield(0, 1) * 512 + b1:bitfield(4, 1) * 256
	local summary = kind
	if is_completion(kind) then
		add_id(t, F.tlp_completer, tvb(off + 4, 2), "Completer ID")
		local st = t:add(F.tlp_status, tvb(off + 6, 1))
		t:add(F.tlp_bcm, tvb(off + 6, 1))
		local bc = tvb(off + 6, 2):bitfield(4, 12)
		local bci = t:add(F.tlp_byte_count, tvb(off + 6, 2))
		if bc == 0 then bci:append_text(" (4096 bytes)") end
		add_id(t, F.tlp_requester, tvb(off + 8, 2), "Requester ID")
		tag = tag + tvb(off + 10, 1):uint()
		t:add(F.tlp_tag, tvb(off + 10, 1), tag)
		t:add(F.tlp_lower_addr, tvb(off + 11, 1))
		local status = tvb(off + 6, 1):bitfield(0, 3)
		summary = string.format("%s %s tag 0x%x", kind, status_names[status] or ("status " .. status), tag)
	else
		add_id(t, F.tlp_requester, tvb(off + 4, 2), "Requester ID")
		tag = tag + tvb(off + 6, 1):uint()
		t:add(F.tlp_tag, tvb(off + 6, 1), tag)
		if is_message(kind) then
			local code = tvb(off + 7, 1):uint()
			t:add(F.tlp_msg_code, tvb(off + 7, 1))
			t:add(F.tlp_routing, b0)
			local routing = b0:bitfield(5, 3)
			t:add(F.tlp_msg_dw2, tvb(off + 8, 4))
			t:add(F.tlp_msg_dw3, tvb(off + 12, 4))
			if routing == 1 then
				t:add(F.tlp_address, tvb(off + 8, 8))
			elseif routing == 2 then
				add_id(t, F.tlp_target, tvb(off + 8, 2), "Target ID")
			end
			summary = string.format("%s %s", kind, message_names[code] or string.format("code 0x%02x", code))
		else
			t:add(F.tlp_last_be, tvb(off + 7, 1))
			t:add(F.tlp_first_be, tvb(off + 7, 1))
			if is_config(kind) then
				add_id(t, F.tlp_target, tvb(off + 8, 2), "Target ID")
				local reg = tvb(off + 10, 2):bitfield(4, 10) * 4
				t:add(F.tlp_register, tvb(off + 10, 2), reg)
				summary = string.format("%s %s reg 0x%03x", kind, bdf(tvb(off + 8, 2):uint()), reg)
			else
				-- memory, IO and atomic: the address without its low two bits
				local last = four and 12 or 8
				local lo = tvb(off + last, 4):uint()
				lo = lo - lo % 4
				local hi = four and tvb(off + 8, 4):uint() or 0
				local addr = UInt64.new(lo, hi)
				t:add(F.tlp_address, tvb(off + 8, hlen - 8), addr):append_text(
					four and " (64-bit)" or " (32-bit)")
				if not is_io(kind) then
					t:add(F.tlp_ph, tvb(off + last + 3, 1))
				end
				summary = string.format("%s %s", kind, hex64(addr))
			end
			summary = string.format("%s tag 0x%x", summary, tag)
		end
	end
	if data and avail > hlen then
		local n = math.min(plen, avail - hlen)
		t:add(F.tlp_data, tvb(off + hlen, n))
		summary = string.format("%s %dB", summary, plen)
	end
	if td and avail >= hlen + plen + 4 then
		t:add(F.tlp_ecrc, tvb(off + hlen + plen, 4))
	end
	if malformed then
		summary = summary .. " [size mismatch]"
	end
	return summary
end

-- Control messages ----------------------------------------------------------

local function add_infinite(tree, field, r, bits)
	local it = tree:add(field, r)
	for _, f in ipairs(bits) do it:add(f, r) end
end

-- dissect_control mirrors encap.ParseControl: it shows the fields present
-- and reports the first rule broken.
local function dissect_control(tvb, off, n, tree)
	local t = tree:add(F.ctl, tvb(off, math.max(0, math.min(n, tvb:len() - off))))
	local function fail(msg)
		t:add_proto_expert_info(E.control, msg)
		return "[bad control message: " .. msg .. "]"
	end
	if n < CONTROL_LEN or tvb:len() - off < CONTROL_LEN then
		return fail(string.format("control message of %d bytes, need at least %d", n, CONTROL_LEN))
	end
	local typ = tvb(off, 1):uint()
	t:add(F.ctl_type, tvb(off, 1))
	t:add(F.ctl_version, tvb(off + 1, 1))
	t:add(F.ctl_role, tvb(off + 2, 1))
	local b3 = tvb(off + 3, 1)
	if typ == 1 or typ == 2 then
		t:add(F.ctl_tag_bits, b3)
	elseif typ == 5 then
		t:add(F.ctl_reason, b3)
	elseif typ == 3 or typ == 4 then
		t:add(F.ctl_probe, b3)
	else
		t:add(F.ctl_byte3, b3)
	end
	t:add(F.ctl_session, tvb(off + 4, 4))
	t:add(F.ctl_peer_session, tvb(off + 8, 4))
	local name = ctl_types[typ]
	if name == nil then
		return fail(string.format("byte 0: unknown control type %d", typ))
	end
	t:append_text(": " .. name)
	if tvb(off + 1, 1):uint() ~= 1 then
		return fail(string.format("byte 1: control version %d, want 1", tvb(off + 1, 1):uint()))
	end
	local role = tvb(off + 2, 1):uint()
	if roles[role] == nil then
		return fail(string.format("byte 2: role %d, want 1 (host) or 2 (gpu)", role))
	end
	local session = tvb(off + 4, 4):uint()
	if session == 0 then
		return fail("bytes 4-7: session is 0")
	end
	local summary = string.format("%s %s session 0x%08x peer 0x%08x", name, roles[role], session,
		tvb(off + 8, 4):uint())
	if typ >= 3 then
		return summary
	end
	if n < HELLO_LEN or tvb:len() - off < HELLO_LEN then
		return fail(string.format("%s of %d bytes, need %d", name, n, HELLO_LEN))
	end
	t:add(F.ctl_window, tvb(off + 12, 2))
	t:add(F.ctl_max_tlp, tvb(off + 14, 2))
	t:add(F.ctl_isn, tvb(off + 16, 4))
	t:add(F.ctl_ph, tvb(off + 20, 2))
	t:add(F.ctl_nph, tvb(off + 22, 2))
	t:add(F.ctl_cplh, tvb(off + 24, 2))
	add_infinite(t, F.ctl_infinite, tvb(off + 26, 1),
		{ F.ctl_inf_ph, F.ctl_inf_pd, F.ctl_inf_nph, F.ctl_inf_npd, F.ctl_inf_cplh, F.ctl_inf_cpld })
	t:add(F.ctl_reserved, tvb(off + 27, 1))
	t:add(F.ctl_pd, tvb(off + 28, 4))
	t:add(F.ctl_npd, tvb(off + 32, 4))
	t:add(F.ctl_cpld, tvb(off + 36, 4))
	local bits = b3:uint()
	if bits ~= 8 and bits ~= 10 then
		return fail(string.format("byte 3: tag bits %d, want 8 or 10", bits))
	end
	if tvb(off + 12, 2):uint() == 0 then
		return fail("bytes 12-13: window is 0")
	end
	if tvb(off + 14, 2):uint() < 16 then
		return fail(string.format("bytes 14-15: max TLP %d below a 4-DW header", tvb(off + 14, 2):uint()))
	end
	if tvb(off + 26, 1):uint() >= 64 then
		return fail(string.format("byte 26: infinite mask 0x%02x has bits above 5", tvb(off + 26, 1):uint()))
	end
	return summary
end

-- dxpu frames ---------------------------------------------------------------

local udp_length = Field.new("udp.length")

-- udp_payload_len returns the UDP payload length that the (innermost) UDP
-- header declares, as encap.ParseFrame reads it. Wireshark's UDP dissector
-- clips the payload to the frame when a capture file records frames cut by
-- the snap length as whole (the NetTLP hardware captures do), which would
-- hide the cut.
local function udp_payload_len(tvb)
	local all = { udp_length() }
	local last = all[#all]
	if last ~= nil and last.value >= 8 then
		return last.value - 8
	end
	return tvb:reported_len()
end

-- check_header mirrors checkDxpu: nil when the header and the length table
-- are consistent, else the expert and its message.
local function check_header(tvb, version, mtype, n, body, base)
	base = base or HEADER_LEN
	if version ~= 1 then
		return E.version, string.format("version %d, want 1", version)
	end
	if msg_types[mtype] == nil then
		return E.msg_type, string.format("message type %d", mtype)
	end
	if mtype ~= 1 then
		if n ~= 0 then
			return E.count, string.format("%d TLPs in a %s message, want 0", n, msg_types[mtype])
		end
		return nil
	end
	if 2 * n > body then
		return E.count, string.format("%d TLPs need a %d-byte length table, body length is %d", n, 2 * n, body)
	end
	if n == 0 and body ~= 0 then
		return E.tlp_len, string.format("body length %d in a TLP message without TLPs", body)
	end
	local sum = 0
	for i = 0, n - 1 do
		local e = base + 2 * i
		if e + 2 > tvb:len() then
			break -- table cut by the capture
		end
		local l = tvb(e, 2):uint()
		if l < 12 or l % 4 ~= 0 then
			return E.tlp_len, string.format("TLP %d: length %d, want a multiple of 4 of at least 12", i, l)
		end
		sum = sum + l
		if 2 * n + sum > body then
			return E.tlp_len, string.format("TLPs 0..%d end at body byte %d, beyond body length %d", i, 2 * n + sum, body)
		end
		if i == n - 1 and 2 * n + sum ~= body then
			return E.tlp_len, string.format("body length %d, the table and %d TLPs fill %d", body, n, 2 * n + sum)
		end
	end
	return nil
end

-- dissect_body shows the body of a checked dxpu frame of type mtype, body
-- bytes from offset base (40, or 52 for the clear body of a GMAC-sealed
-- frame), under tree: the TLP length table and TLPs, the control message,
-- or the raw body. It returns info extended with a summary.
local function dissect_body(tvb, base, mtype, n, body, tree, info)
	local have = tvb:len()
	if mtype == 1 then
		local seq = tvb(8, 4):uint()
		info = string.format("%s seq %d", info, seq)
		local off = base + 2 * n
		local parts = {}
		for i = 0, n - 1 do
			local e = base + 2 * i
			if e + 2 > have then -- the table entry itself is cut
				parts[#parts + 1] = dissect_tlp(tvb, have, 12, tree, i, (seq + i) % 4294967296)
			else
				local l = tvb(e, 2):uint()
				tree:add(F.tlp_len, tvb(e, 2)):prepend_text(string.format("[%d] ", i))
				parts[#parts + 1] = dissect_tlp(tvb, off, l, tree, i, (seq + i) % 4294967296)
				off = off + l
			end
		end
		if n > 0 then
			info = info .. ": " .. table.concat(parts, ", ")
		end
	elseif mtype == 5 then
		info = info .. ": " .. dissect_control(tvb, base, body, tree)
	else
		if mtype == 2 or mtype == 3 then
			info = string.format("%s ack %d", info, tvb(12, 4):uint())
		end
		if body > 0 then
			tree:add(F.body, tvb(base, math.min(body, have - base)))
		end
	end
	return info
end

-- dissect_sealed shows the security header, body and tag of a sealed
-- frame (bridge/seal): the TLPs or control message inside are encrypted
-- (GCM) or authenticated only (GMAC); `dxpu pcap unseal` with the bridges'
-- key log turns the capture into plain frames. Its checks are those of the
-- seal's clear parts: the body holds at least the security header and tag,
-- the mode is GCM or GMAC, reserved kind bits and (under the handshake
-- key) epoch and echo are 0, the message type is known.
local function dissect_sealed(tvb, pinfo, root, info, mtype, n, body, reject)
	local have = tvb:len()
	if mtype < 1 or mtype > 5 then
		return reject(E.msg_type, string.format("message type %d", mtype))
	end
	if mtype ~= 1 and n ~= 0 then
		return reject(E.count, string.format("%d TLPs in a %s message, want 0", n, msg_types[mtype]))
	end
	if body < SEAL_OVERHEAD then
		return reject(E.seal, string.format("sealed body of %d bytes, the security header and tag alone are %d",
			body, SEAL_OVERHEAD))
	end
	local hs = have >= HEADER_LEN + 2 and tvb(HEADER_LEN + 1, 1):uint() >= 128
	local sec = hs and HS_SEC_HEADER_LEN or SEC_HEADER_LEN
	if hs and body < HS_SEAL_OVERHEAD then
		return reject(E.seal, string.format(
			"sealed handshake body of %d bytes, the security header with boot ID and tag alone are %d",
			body, HS_SEAL_OVERHEAD))
	end
	local fin = HEADER_LEN + body
	root:set_len(math.min(fin, have))
	if have < HEADER_LEN + sec then
		root:add_proto_expert_info(E.truncated, string.format(
			"lengths declare %d bytes, the capture holds %d", fin, have))
		pinfo.cols.info = info .. " sealed [cut]"
		return have
	end
	local st = root:add(F.seal, tvb(HEADER_LEN, math.min(body, have - HEADER_LEN)))
	local kr = tvb(HEADER_LEN + 1, 1)
	local kind = kr:uint()
	local mode, reserved = kind % 4, math.floor(kind / 4) % 32
	local epoch, echo, gen = tvb(HEADER_LEN, 1):uint(), tvb(HEADER_LEN + 2, 1):uint(), tvb(HEADER_LEN + 3, 1):uint()
	st:add(F.seal_epoch, tvb(HEADER_LEN, 1))
	local kt = st:add(F.seal_kind, kr)
	kt:add(F.seal_mode, kr)
	kt:add(F.seal_handshake, kr)
	kt:add(F.seal_kind_reserved, kr)
	st:add(F.seal_echo, tvb(HEADER_LEN + 2, 1))
	st:add(F.seal_generation, tvb(HEADER_LEN + 3, 1))
	local pnr = tvb(HEADER_LEN + 4, 8)
	st:add(F.seal_pn, pnr)
	if hs then
		st:add(F.seal_boot_id, tvb(HEADER_LEN + SEC_HEADER_LEN, BOOT_ID_LEN))
	end
	local plen = body - sec - TAG_LEN
	st:add(F.seal_plain_len, plen):set_generated()
	local boff = HEADER_LEN + sec
	local bavail = math.max(0, math.min(plen, have - boff))
	if bavail > 0 then
		st:add(mode == 2 and F.seal_plaintext or F.seal_ciphertext, tvb(boff, bavail))
	end
	if have >= fin then
		st:add(F.seal_tag, tvb(fin - TAG_LEN, TAG_LEN))
	else
		root:add_proto_expert_info(E.truncated, string.format(
			"lengths declare %d bytes, the capture holds %d", fin, have))
	end
	local key = hs and "handshake key" or string.format("epoch %d", epoch)
	info = string.format("%s sealed (%s gen %d %s pn %s)", info, seal_modes[mode] or "mode ?", gen, key,
		tostring(pnr:uint64()))
	root:append_text(string.format(", sealed: %s, generation %d, %s", seal_modes[mode] or "bad mode", gen, key))
	pinfo.cols.info = info
	if mode ~= 1 and mode ~= 2 then
		st:add_proto_expert_info(E.seal, string.format("mode %d, want 1 (GCM) or 2 (GMAC)", mode))
	elseif reserved ~= 0 then
		st:add_proto_expert_info(E.seal, string.format("reserved kind bits set: kind 0x%02x", kind))
	elseif hs and (epoch ~= 0 or echo ~= 0) then
		st:add_proto_expert_info(E.seal, string.format("handshake frame with epoch %d echo %d", epoch, echo))
	elseif hs and mtype ~= 5 then
		st:add_proto_expert_info(E.seal, string.format("%s frame under the handshake key", msg_types[mtype]))
	elseif mode == 2 then
		-- GMAC leaves the body in clear: show it as a plain frame's.
		local ex, msg = check_header(tvb, 1, mtype, n, plen, boff)
		if ex ~= nil then
			st:add_proto_expert_info(ex, msg)
		else
			pinfo.cols.info = dissect_body(tvb, boff, mtype, n, plen, root, info)
		end
	end
	return math.min(fin, have)
end

-- dissect_dxpu dissects a dxpu header and body at the start of tvb; udp is
-- true over UDP, where the datagram's size is the UDP payload's (or
-- seg_size, one datagram of a GSO super-datagram). It returns the bytes it
-- consumed.
local function dissect_dxpu(tvb, pinfo, tree, udp, seg_size)
	pinfo.cols.protocol = "dxpu"
	local have = tvb:len()
	local size = seg_size or (udp and udp_payload_len(tvb) or tvb:reported_len())
	local root = tree:add(dxpu, tvb(0, math.min(have, HEADER_LEN)))
	local info = "dxpu"
	-- reject shows why the frame cannot be read further.
	local function reject(ex, msg)
		root:add_proto_expert_info(ex, msg)
		pinfo.cols.info = info .. " [" .. msg .. "]"
		return have
	end
	if udp and size < HEADER_LEN then
		return reject(E.short, string.format("UDP payload of %d bytes, the dxpu header needs %d", size, HEADER_LEN))
	end
	if have < HEADER_LEN then
		return reject(E.short, string.format("header cut: %d bytes, need %d", have, HEADER_LEN))
	end
	local version = tvb(0, 1):bitfield(0, 4)
	local mtype = tvb(1, 1):uint()
	local n = tvb(5, 1):uint()
	local body = tvb(6, 2):uint()
	root:add(F.version, tvb(0, 1))
	local fl = root:add(F.flags, tvb(0, 1))
	fl:add(F.flag_ack, tvb(0, 1))
	fl:add(F.flag_credit, tvb(0, 1))
	fl:add(F.flag_sack, tvb(0, 1))
	fl:add(F.flag_sealed, tvb(0, 1))
	root:add(F.type, tvb(1, 1))
	root:add(F.pair, tvb(2, 3))
	root:add(F.count, tvb(5, 1))
	root:add(F.body_len, tvb(6, 2))
	root:add(F.seq, tvb(8, 4))
	root:add(F.ack, tvb(12, 4))
	root:add(F.sack, tvb(16, 4))
	root:add(F.limit_ph, tvb(20, 2))
	root:add(F.limit_nph, tvb(22, 2))
	root:add(F.limit_cplh, tvb(24, 2))
	add_infinite(root, F.infinite, tvb(26, 1),
		{ F.inf_ph, F.inf_pd, F.inf_nph, F.inf_npd, F.inf_cplh, F.inf_cpld })
	root:add(F.reserved, tvb(27, 1))
	root:add(F.limit_pd, tvb(28, 4))
	root:add(F.limit_npd, tvb(32, 4))
	root:add(F.limit_cpld, tvb(36, 4))

	local pair = tvb(2, 3):uint()
	local mname = msg_types[mtype] or ("type " .. mtype)
	info = string.format("%s pair %d", mname, pair)
	pinfo.cols.info = info
	root:append_text(string.format(", %s, pair %d", mname, pair))

	if udp and version == 1 and HEADER_LEN + body ~= size then
		return reject(E.body_len, string.format("body length %d, UDP payload after the header is %d",
			body, size - HEADER_LEN))
	end
	if version == 1 and tvb(0, 1):bitfield(4, 1) == 1 then
		return dissect_sealed(tvb, pinfo, root, info, mtype, n, body, reject)
	end
	local ex, msg = check_header(tvb, version, mtype, n, body)
	if ex ~= nil then
		return reject(ex, msg)
	end
	local fin = HEADER_LEN + body
	if fin > have then
		root:add_proto_expert_info(E.truncated, string.format(
			"lengths declare %d bytes, the capture holds %d", fin, have))
	end
	root:set_len(math.min(fin, have))

	pinfo.cols.info = dissect_body(tvb, HEADER_LEN, mtype, n, body, root, info)
	return math.min(fin, have)
end

-- guarded runs f and turns a Lua error (a bug here) into an expert info,
-- so a capture never shows a Lua error.
local function guarded(f, tvb, pinfo, tree, ...)
	local ok, res = pcall(f, tvb, pinfo, tree, ...)
	if ok then
		return res
	end
	tree:add_proto_expert_info(E.internal, "dxpu.lua: " .. tostring(res))
	return tvb:len()
end

function dxpu.dissector(tvb, pinfo, tree)
	return guarded(dissect_dxpu, tvb, pinfo, tree, false)
end

-- dxpu over UDP is recognised by its destination port only, as ParseFrame
-- does; a datagram from that port elsewhere is left to other dissectors.
local dxpu_udp = Proto("dxpu_udp", "dxpu over UDP (dispatch)")
-- A UDP segmentation-offload send, captured on the sending host before
-- the kernel or the NIC cut it (tcpdump, dumpcap), is one datagram holding
-- several dxpu datagrams back to back: every one gso_size bytes but the
-- last, which may be shorter. Receivers only ever see them one by one.
-- `dxpu pcap capture` records them as they leave; this shows both.

-- gso_segments returns the offsets and sizes of the dxpu datagrams a UDP
-- payload of size bytes holds back to back, or nil when it is one datagram
-- or the chain of headers does not fill it exactly.
local function gso_segments(tvb, size)
	if tvb:len() < size or size < 2 * HEADER_LEN then
		return nil
	end
	local seg = HEADER_LEN + tvb(6, 2):uint()
	if seg >= size then
		return nil
	end
	local segs, off = {}, 0
	while off < size do
		if size - off < HEADER_LEN or tvb(off, 1):bitfield(0, 4) ~= 1 then
			return nil
		end
		local this = HEADER_LEN + tvb(off + 6, 2):uint()
		if off + this > size or (off + this < size and this ~= seg) or this > seg then
			return nil
		end
		segs[#segs + 1] = { off, this }
		off = off + this
	end
	return segs
end

-- dissect_udp dissects a dxpu datagram, or each datagram of a GSO
-- super-datagram with a note that says what it is.
local function dissect_udp(tvb, pinfo, tree)
	local segs = gso_segments(tvb, udp_payload_len(tvb))
	if segs == nil then
		return dissect_dxpu(tvb, pinfo, tree, true)
	end
	local infos = {}
	for i, s in ipairs(segs) do
		local sub = tvb(s[1], s[2]):tvb()
		dissect_dxpu(sub, pinfo, tree, true, s[2])
		infos[i] = tostring(pinfo.cols.info)
	end
	tree:add_proto_expert_info(E.gso, string.format(
		"%d dxpu datagrams in one GSO send of %d bytes each (captured before segmentation)", #segs, segs[1][2]))
	pinfo.cols.info = string.format("GSO x%d: %s", #segs, table.concat(infos, " | "))
	return tvb:len()
end

function dxpu_udp.dissector(tvb, pinfo, tree)
	if pinfo.dst_port ~= dxpu.prefs.udp_port then
		return 0
	end
	return guarded(dissect_udp, tvb, pinfo, tree)
end

-- looks_like_dxpu is the heuristic that finds dxpu on a UDP port other than
-- the preference's (bridges may listen anywhere): a whole 40-byte header of
-- version 1 with a known message type, a body length that fills the UDP
-- payload exactly, the reserved byte 0, and a body that fits the header:
-- the TLP length table (check_header) or, sealed, the security header and
-- tag with a valid mode and reserved kind bits clear.
local function looks_like_dxpu(tvb, size)
	if tvb:len() < HEADER_LEN or size < HEADER_LEN or tvb(0, 1):bitfield(0, 4) ~= 1 then
		return false
	end
	local mtype, n, body = tvb(1, 1):uint(), tvb(5, 1):uint(), tvb(6, 2):uint()
	if mtype < 1 or mtype > 5 or HEADER_LEN + body ~= size or tvb(27, 1):uint() ~= 0 then
		return false
	end
	if tvb(0, 1):bitfield(4, 1) == 0 then
		return check_header(tvb, 1, mtype, n, body) == nil
	end
	if body < SEAL_OVERHEAD or tvb:len() < HEADER_LEN + 2 or (mtype ~= 1 and n ~= 0) then
		return false
	end
	local kind = tvb(HEADER_LEN + 1, 1):uint()
	local mode = kind % 4
	if kind >= 128 and body < HS_SEAL_OVERHEAD then
		return false
	end
	return (mode == 1 or mode == 2) and math.floor(kind / 4) % 32 == 0
end

-- looks_like_dxpu_udp: the UDP payload is one dxpu datagram, or a GSO
-- super-datagram of them, each of which looks like one.
local function looks_like_dxpu_udp(tvb)
	local size = udp_payload_len(tvb)
	if looks_like_dxpu(tvb, size) then
		return true
	end
	local segs = gso_segments(tvb, size)
	if segs == nil then
		return false
	end
	for _, s in ipairs(segs) do
		if not looks_like_dxpu(tvb(s[1], s[2]):tvb(), s[2]) then
			return false
		end
	end
	return true
end

local function heuristic_udp(tvb, pinfo, tree)
	if not dxpu.prefs.heuristic or pinfo.dst_port == dxpu.prefs.udp_port then
		return false
	end
	local ok, yes = pcall(looks_like_dxpu_udp, tvb)
	if not ok or not yes then
		return false
	end
	guarded(dissect_udp, tvb, pinfo, tree)
	return true
end

-- NetTLP --------------------------------------------------------------------

local function dissect_nettlp(tvb, pinfo, tree)
	pinfo.cols.protocol = "NetTLP"
	local have, size = tvb:len(), udp_payload_len(tvb)
	local root = tree:add(nettlp, tvb(0, math.min(have, NETTLP_HEADER_LEN)))
	local function reject(ex, msg)
		root:add_proto_expert_info(ex, msg)
		pinfo.cols.info = "NetTLP [" .. msg .. "]"
		return have
	end
	if size < NETTLP_HEADER_LEN then
		return reject(E.nettlp, string.format("UDP payload of %d bytes, the NetTLP header needs %d",
			size, NETTLP_HEADER_LEN))
	end
	if size == NETTLP_HEADER_LEN then
		return reject(E.nettlp, "datagram carries no TLP after its header")
	end
	if have < NETTLP_HEADER_LEN then
		return reject(E.short, string.format("header cut by the capture (%d bytes)", have))
	end
	root:add(NF.seq, tvb(0, 2))
	root:add(NF.timestamp, tvb(2, 4))
	if size > have then
		root:add_proto_expert_info(E.truncated, string.format(
			"UDP payload of %d bytes, the capture holds %d", size, have))
	end
	root:set_len(have)
	pinfo.cols.info = string.format("NetTLP seq %d: %s", tvb(0, 2):uint(),
		dissect_tlp(tvb, NETTLP_HEADER_LEN, size - NETTLP_HEADER_LEN, root, 0, nil))
	return have
end

function nettlp.dissector(tvb, pinfo, tree)
	if pinfo.dst_port == dxpu.prefs.udp_port then
		return 0
	end
	return guarded(dissect_nettlp, tvb, pinfo, tree)
end

-- Registration --------------------------------------------------------------

DissectorTable.get("ethertype"):add(0x88b5, dxpu)
dxpu:register_heuristic("udp", heuristic_udp)

local udp_table = DissectorTable.get("udp.port")
local registered_port, registered_range

local function register_ports()
	if registered_port ~= nil then
		udp_table:remove(registered_port, dxpu_udp)
	end
	registered_port = dxpu.prefs.udp_port
	udp_table:add(registered_port, dxpu_udp)
	if registered_range ~= nil then
		udp_table:remove(registered_range, nettlp)
	end
	registered_range = tostring(nettlp.prefs.ports)
	if registered_range ~= "" then
		udp_table:add(registered_range, nettlp)
	end
end

dxpu.prefs_changed = register_ports
nettlp.prefs_changed = register_ports
register_ports()
