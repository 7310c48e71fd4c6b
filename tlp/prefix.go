package tlp

// SplitPrefixes separates the TLP prefixes (1-DW headers with Fmt 100:
// Local prefixes Type 0xxxx, End-End prefixes Type 1xxxx) at the start of b
// from the TLP that follows. It allocates nothing. Parse the returned tlp
// with Parse; note that the ECRC of a TLP with End-End prefixes also covers
// those prefixes, so verify it with ComputeECRC over prefixes and TLP when
// TD is set (Parse alone then reports an ECRC mismatch).
func SplitPrefixes(b []byte) (prefixes, tlp []byte, err error) {
	n := 0
	for n < len(b) && b[n]>>5 == FmtPrefix {
		if len(b)-n < 4 {
			return nil, nil, newErr(RuleTruncatedHeader, KindInvalid, "", 0, ErrTruncated,
				"TLP prefix at byte %d needs 4 bytes, have %d", n, len(b)-n)
		}
		n += 4
	}
	return b[:n], b[n:], nil
}
