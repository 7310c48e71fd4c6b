// Package snakejson writes structs of lower layers, which carry no JSON
// tags, with the keys every dxpu report uses: snake_case names, and
// durations as microseconds under a key ending in _us ("SRTT" becomes
// "srtt_us": 12.5).
package snakejson

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"
)

var durationType = reflect.TypeFor[time.Duration]()

// Marshal writes the exported fields of the struct v as one JSON object
// with snake_case keys (Marshal of anything but a struct is an error).
func Marshal(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Struct {
		return nil, fmt.Errorf("snakejson: %T is not a struct", v)
	}
	out := make(map[string]any, rv.NumField())
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		key, val := Key(f.Name), rv.Field(i).Interface()
		if f.Type == durationType {
			key += "_us"
			val = float64(rv.Field(i).Int()) / float64(time.Microsecond)
		}
		out[key] = val
	}
	return json.Marshal(out)
}

// Key turns a Go field name into snake_case: FramesSent frames_sent,
// SRTT srtt, TLPsSent tlps_sent, PayloadBytesRx payload_bytes_rx.
func Key(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1])
			// An acronym ends where a word starts (SRTTValue: "SRTT"
			// "Value"), unless what follows is its plural s (TLPsSent,
			// RTOs).
			plural := i+1 < len(r) && r[i+1] == 's' && (i+2 == len(r) || unicode.IsUpper(r[i+2]))
			acronymEnd := unicode.IsUpper(r[i-1]) && i+1 < len(r) && unicode.IsLower(r[i+1]) && !plural
			if prevLower || acronymEnd {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
