package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/service"
)

// GET /api/v1/sales: one page of the list, sorted by (starts_at, id), with a cursor to the next
// (docs/API.md "Paging and caching the list"). The page is the service's, from its cache.

func (s *Server) listSales(w http.ResponseWriter, r *http.Request) error {
	listedOnly, err := s.listedOnly(r)
	if err != nil {
		return err
	}
	query := r.URL.Query()
	q := service.SalePageQuery{All: !listedOnly, Limit: seckill.DefaultListLimit}
	if q.Filter, err = service.ParseSaleFilter(query.Get("status")); err != nil {
		return err
	}
	if v, ok := query["limit"]; ok {
		if q.Limit, err = parseListLimit(v[0]); err != nil {
			return err
		}
	}
	if c := query.Get("cursor"); c != "" {
		after, err := s.cursors.open(c, q.All, q.Filter)
		if err != nil {
			return err
		}
		q.After = &after
	}
	page, err := s.svc.SalePage(r.Context(), q)
	if err != nil {
		return err
	}
	next := ""
	if page.Next != nil {
		next = s.cursors.seal(*page.Next, q.All, q.Filter)
	}
	now := s.now()
	// Each sale is rendered on its own: one that cannot be (a time outside the years 0–9999,
	// stored before sale times were bounded) is left out and logged, never the whole page.
	// The ETag is of the page without its clocks (server_time): a page whose sales, stock and
	// statuses are unchanged is the same page a second later (a weak validator).
	tag := newValidator()
	list := make([]json.RawMessage, 0, len(page.Sales))
	for _, v := range page.Sales {
		b, unclocked, err := renderSale(v, now)
		if err != nil {
			s.log.Error("sale left out of the list: cannot render it", "sale", v.ID, "err", err)
			continue
		}
		tag.add(unclocked)
		list = append(list, b)
	}
	tag.add([]byte(next))
	// The list's own cache (the service's) may be DefaultListTTL old: a CDN's second on top.
	cacheControl := cachePublic
	if !listedOnly {
		cacheControl = cachePrivate
	}
	if notModified(w, r, tag.etag(), cacheControl) {
		return nil
	}
	answer := struct {
		Sales      []json.RawMessage `json:"sales"`
		NextCursor string            `json:"next_cursor,omitempty"`
		ServerTime time.Time         `json:"server_time"`
	}{list, next, now}
	return writeJSON(w, http.StatusOK, answer)
}

// parseListLimit reads limit: decimal digits only, 1..MaxListLimit.
func parseListLimit(v string) (int, error) {
	n := 0
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' || n > seckill.MaxListLimit {
			n = -1
			break
		}
		n = n*10 + int(v[i]-'0')
	}
	if n < 1 || n > seckill.MaxListLimit {
		return 0, seckill.Errorf(seckill.CodeInvalidArgument, "limit must be 1 to %d", seckill.MaxListLimit)
	}
	return n, nil
}

// cursors seal and open the list's cursors: a position in the list's order, bound to the
// query it was answered for (all, status), and signed, so that a cursor this API did not
// answer, or answered for another query, is refused (invalid_argument) rather than read as
// some other page. Its layout (version 1), before base64url without padding:
//
//	version(1) | query(1) | starts_at seconds(8) | nanoseconds(4) | len(id)(1) | id | HMAC-SHA256(16)
//
// The key is derived from SECKILL_AUTH_SECRET, so every instance that shares the secret opens
// every other's cursors.
type cursors struct{ key []byte }

const (
	cursorVersion = 1
	cursorMACLen  = 16
	cursorFixed   = 1 + 1 + 8 + 4 + 1
)

func newCursors(authSecret []byte) cursors {
	m := hmac.New(sha256.New, authSecret)
	m.Write([]byte("seckill list cursor v1"))
	return cursors{key: m.Sum(nil)}
}

func cursorQuery(all bool, f service.SaleFilter) byte {
	var b byte
	switch f {
	case service.FilterUpcoming:
		b = 1
	case service.FilterSelling:
		b = 2
	case service.FilterEnded:
		b = 3
	}
	if all {
		b |= 4
	}
	return b
}

func (c cursors) mac(b []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(b)
	return m.Sum(nil)[:cursorMACLen]
}

func (c cursors) seal(p service.SalePosition, all bool, f service.SaleFilter) string {
	b := make([]byte, 0, cursorFixed+len(p.ID)+cursorMACLen)
	b = append(b, cursorVersion, cursorQuery(all, f))
	b = binary.BigEndian.AppendUint64(b, uint64(p.StartsAt.Unix()))
	b = binary.BigEndian.AppendUint32(b, uint32(p.StartsAt.Nanosecond()))
	b = append(b, byte(len(p.ID)))
	b = append(b, p.ID...)
	b = append(b, c.mac(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// open reads a cursor sealed for the same query; anything else is invalid_argument.
func (c cursors) open(s string, all bool, f service.SaleFilter) (service.SalePosition, error) {
	bad := seckill.Errorf(seckill.CodeInvalidArgument, "cursor is not one this list answered (start again without it)")
	if len(s) > seckill.MaxListCursor {
		return service.SalePosition{}, bad
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < cursorFixed+cursorMACLen {
		return service.SalePosition{}, bad
	}
	body, sum := b[:len(b)-cursorMACLen], b[len(b)-cursorMACLen:]
	if !hmac.Equal(sum, c.mac(body)) {
		return service.SalePosition{}, bad
	}
	if body[0] != cursorVersion {
		return service.SalePosition{}, bad
	}
	if body[1] != cursorQuery(all, f) {
		return service.SalePosition{}, seckill.Errorf(seckill.CodeInvalidArgument, "cursor was answered for another status or all (start again without it)")
	}
	secs, nanos := int64(binary.BigEndian.Uint64(body[2:])), binary.BigEndian.Uint32(body[10:])
	id := string(body[cursorFixed:])
	if int(body[14]) != len(id) || !seckill.ValidID(id) || nanos >= 1e9 {
		return service.SalePosition{}, bad
	}
	return service.SalePosition{StartsAt: time.Unix(secs, int64(nanos)).UTC(), ID: id}, nil
}
