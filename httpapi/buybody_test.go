package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seckill-go/seckill"
)

// FuzzFastQuantity: whatever body fastQuantity accepts, the strict decoder accepts too, with
// the same quantity.
func FuzzFastQuantity(f *testing.F) {
	for _, s := range []string{`{"quantity":1}`, `{"quantity":999999999}`, `{"quantity":01}`, `{"quantity":-1}`,
		`{"Quantity":2}`, `{"quantity":1} `, `{"quantity":1e2}`, `{"quantity":1}{}`, `{}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, ok := fastQuantity(b)
		if !ok {
			return
		}
		var in BuyBody
		if err := DecodeStrict(b, &in); err != nil || in.Quantity == nil || *in.Quantity != q {
			t.Fatalf("fastQuantity(%q) = %d, but the strict decoder says %v, %v", b, q, in.Quantity, err)
		}
	})
}

// TestBuyQuantity: the fast path takes the usual bodies, and everything else is answered as
// the strict decoder always answered it (quantity, or the error code).
func TestBuyQuantity(t *testing.T) {
	cases := []struct {
		body string
		want int
		code seckill.Code
		fast bool
	}{
		{``, 1, "", false},
		{`{"quantity":1}`, 1, "", true},
		{`{"quantity":123456789}`, 123456789, "", true},
		{`{"quantity":1234567890}`, 1234567890, "", false}, // ten digits: the decoder's
		{`{ "quantity": 2 }`, 2, "", false},
		{`{"Quantity":3}`, 3, "", false}, // encoding/json matches names case-insensitively
		{`{}`, 1, "", false},
		{`{"quantity":null}`, 1, "", false},
		{`{"quantity":0}`, 0, "", false},
		{`{"quantity":-1}`, -1, "", false},
		{`{"quantity":01}`, 0, seckill.CodeInvalidArgument, false},
		{`{"quantity":1.5}`, 0, seckill.CodeInvalidArgument, false},
		{`{"quantity":"1"}`, 0, seckill.CodeInvalidArgument, false},
		{`{"quantity":1,"x":1}`, 0, seckill.CodeInvalidArgument, false},
		{`{"quantity":1}{}`, 0, seckill.CodeInvalidArgument, false},
		{` `, 0, seckill.CodeInvalidArgument, false},
		{`{"quantity":1` + strings.Repeat(" ", 200) + `}`, 1, "", false}, // longer than the pooled buffer
		{`{"quantity":1` + strings.Repeat(" ", MaxBody) + `}`, 0, seckill.CodeTooLarge, false},
	}
	for _, c := range cases {
		if _, ok := fastQuantity([]byte(c.body)); ok != c.fast {
			t.Errorf("fastQuantity(%.40q) ok = %v, want %v", c.body, ok, c.fast)
		}
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(c.body))
		q, err := buyQuantity(httptest.NewRecorder(), r)
		if got := seckill.ErrorCode(err); got != c.code || (err == nil && q != c.want) {
			t.Errorf("buyQuantity(%.40q) = %d, %v; want %d, code %q", c.body, q, err, c.want, c.code)
		}
	}
}
