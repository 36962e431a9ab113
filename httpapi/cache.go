package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"net/http"
	"strings"
	"time"

	"github.com/seckill-go/seckill/service"
)

// Caching of the public reads: the sale (GET /api/v1/sales/{id}) and the storefront's list
// (GET /api/v1/sales). Their answers are the same for every caller, so a CDN or caching proxy
// may keep one for a second and serve it stale while it fetches the next (docs/API.md "Caching
// the public reads", docs/CDN.md). The stock they show may be a second old, as the list's own
// cache already is; the buy path never reads through a cache. An admin's list (all=true:
// unlisted sales) is nobody's to keep, and no error answer is kept (writeError: no-store).
const (
	cachePublic  = "public, max-age=1, s-maxage=1, stale-while-revalidate=5"
	cachePrivate = "private, no-store"
)

// validator is a weak ETag over an answer without its clocks (server_time): an answer whose
// sales, stock and statuses are unchanged is the same answer a second later.
type validator struct{ h hash.Hash }

func newValidator() validator { return validator{sha256.New()} }

func (v validator) add(b []byte) { v.h.Write(b) }

func (v validator) etag() string { return `W/"` + hex.EncodeToString(v.h.Sum(nil)[:12]) + `"` }

// renderUnclocked renders v as answered (with its clock, *clock, as it is) and without its clock
// (*clock zeroed for the moment), for the validator.
func renderUnclocked[T any](v *T, clock *time.Time) (answer, unclocked []byte, err error) {
	now := *clock
	*clock = time.Time{}
	unclocked, err = json.Marshal(v)
	*clock = now
	if err != nil {
		return nil, nil, err
	}
	if answer, err = json.Marshal(v); err != nil {
		return nil, nil, err
	}
	return answer, unclocked, nil
}

// renderSale renders a sale as answered at now, and without its clock for the validator.
func renderSale(v service.SaleView, now time.Time) (answer, unclocked []byte, err error) {
	v.ServerTime = now
	return renderUnclocked(&v, &v.ServerTime)
}

// writeCacheable answers a public read that a cache may keep for a second: its ETag is of the
// answer without its clock (unclocked), and a request naming that ETag gets 304.
func writeCacheable(w http.ResponseWriter, r *http.Request, answer, unclocked []byte) {
	tag := newValidator()
	tag.add(unclocked)
	if notModified(w, r, tag.etag(), cachePublic) {
		return
	}
	writeJSONBody(w, http.StatusOK, append(answer, '\n'))
}

// notModified sets an answer's ETag and Cache-Control and, when the request's If-None-Match
// names the ETag, answers 304 without a body and reports true; the caller then writes nothing.
func notModified(w http.ResponseWriter, r *http.Request, etag, cacheControl string) bool {
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", cacheControl)
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	return false
}

// etagMatches is If-None-Match's weak comparison (RFC 9110 13.1.2): "*" or any listed tag
// with the same opaque part, W/ or not.
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	want := strings.TrimPrefix(etag, "W/")
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == want {
			return true
		}
	}
	return false
}
