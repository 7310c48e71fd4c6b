package httpguard

import (
	"net/http"
	"time"

	"github.com/dxpu/dxpu/fabric/httpbody"
)

// BodyBound is httpbody.Bound: New applies it with Config.BodyTimeout, at
// most ReadTimeout less ReadHeaderTimeout.
func BodyBound(next http.Handler, bound time.Duration) http.Handler {
	return httpbody.Bound(next, bound)
}
