package tlp

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every *Error matches ErrMalformed and exactly one of the
// more specific sentinels below (ErrLengthMismatch on a short TLP also
// matches ErrTruncated), so callers can test with errors.Is.
var (
	// ErrMalformed matches every rule violation reported by Parse or by
	// encoding: the TLP breaks the PCIe Base Specification.
	ErrMalformed = errors.New("malformed TLP")
	// ErrTruncated: the bytes end before the header (or the declared
	// payload and digest) does.
	ErrTruncated = errors.New("truncated TLP")
	// ErrReservedFmtType: Fmt, Type or a message routing is a reserved
	// encoding.
	ErrReservedFmtType = errors.New("reserved Fmt/Type")
	// ErrPrefix: the bytes start with a TLP prefix (Fmt 100); strip it with
	// SplitPrefixes first.
	ErrPrefix = errors.New("TLP prefix")
	// ErrLengthMismatch: header + Length payload + digest != size.
	ErrLengthMismatch = errors.New("payload size does not match Length")
	// ErrUnexpectedData: bytes follow the header of a TLP type that has no
	// payload.
	ErrUnexpectedData = errors.New("data on a TLP type without data")
	// ErrRequestRule: an IO or configuration request breaks its fixed field
	// values (Length 1, TC 0, Attr 0, AT 0, Last BE 0).
	ErrRequestRule = errors.New("IO/configuration request rule")
	// ErrByteEnables: First/Last DW BE inconsistent with Length.
	ErrByteEnables = errors.New("byte enable rule")
	// ErrCross4K: a memory request crosses a 4 KiB boundary.
	ErrCross4K = errors.New("request crosses a 4 KiB boundary")
	// ErrAtomicOperand: an AtomicOp with a bad operand size or alignment.
	ErrAtomicOperand = errors.New("AtomicOp operand rule")
	// ErrByteCount: a completion carries more data than its Byte Count.
	ErrByteCount = errors.New("completion byte count rule")
	// ErrMessageRule: a message breaks a rule of its message code.
	ErrMessageRule = errors.New("message rule")
	// ErrBadECRC: the digest does not match the ECRC of header and data.
	ErrBadECRC = errors.New("ECRC mismatch")
	// ErrField: a Packet field is out of range and cannot be encoded.
	ErrField = errors.New("field out of range")
)

// Rule names carried in Error.Rule. They are stable identifiers: the CLI
// prints them and tests match them.
const (
	RuleTruncatedHeader  = "truncated-header"
	RuleReservedFmt      = "reserved-fmt"
	RuleReservedFmtType  = "reserved-fmt-type"
	RuleMessageRouting   = "reserved-message-routing"
	RulePrefix           = "tlp-prefix"
	RuleLengthMismatch   = "length-mismatch"
	RuleUnexpectedData   = "data-on-type-without-data"
	RuleIOCfgLength      = "io-cfg-length"
	RuleIOCfgTC          = "io-cfg-tc"
	RuleIOCfgAttr        = "io-cfg-attr"
	RuleIOCfgAT          = "io-cfg-at"
	RuleLastBELength1    = "last-be-with-length-1"
	RuleZeroBE           = "zero-be-with-length-over-1"
	RuleBEContiguous     = "be-not-contiguous"
	RuleCross4K          = "cross-4k"
	RuleAtomicSize       = "atomic-operand-size"
	RuleAtomicAlign      = "atomic-alignment"
	RuleCplByteCount     = "cpl-length-exceeds-byte-count"
	RuleECRC             = "ecrc-mismatch"
	RuleFieldRange       = "field-range"
	RuleDataLengthPacket = "data-length"
	RuleKindPacket       = "kind"
	RuleMessageTC        = "message-tc"
)

// Error is a rule violation found while decoding or encoding a TLP. It
// names the rule, the field (with its JSON name) and the value found.
type Error struct {
	Rule   string // one of the Rule* constants
	Kind   Kind   // KindInvalid when Fmt/Type did not decode
	Field  string // the offending field, as named in the JSON form
	Value  uint64 // the value found in Field
	Detail string // what the rule wants
	Err    error  // the specific sentinel (ErrTruncated, ErrCross4K, ...)
	also   error  // a second sentinel, if any
}

func (e *Error) Error() string {
	k := "TLP"
	if e.Kind != KindInvalid {
		k = e.Kind.String()
	}
	if e.Field == "" {
		return fmt.Sprintf("tlp: %s: rule %s: %s", k, e.Rule, e.Detail)
	}
	return fmt.Sprintf("tlp: %s: rule %s: %s=%d (%#x): %s", k, e.Rule, e.Field, e.Value, e.Value, e.Detail)
}

// Unwrap lets errors.Is match the specific sentinel and ErrMalformed.
func (e *Error) Unwrap() []error {
	if e.also != nil {
		return []error{e.Err, e.also, ErrMalformed}
	}
	return []error{e.Err, ErrMalformed}
}

// newErr builds an *Error. It is kept out of line so that the validation
// fast paths stay small.
//
//go:noinline
func newErr(rule string, k Kind, field string, value uint64, sentinel error, format string, args ...any) *Error {
	return &Error{Rule: rule, Kind: k, Field: field, Value: value, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

// RuleOf returns the rule name of err if it is (or wraps) an *Error, else "".
func RuleOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Rule
	}
	return ""
}
