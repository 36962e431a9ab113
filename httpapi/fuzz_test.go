package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/httpapi"
	"github.com/seckill-go/seckill/payment"
)

// FuzzDecodeStrict: DecodeStrict never panics, and whatever it accepts survives a round trip:
// re-encoded and decoded again it is accepted and equal, for the buy body and the sale input.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		`{"quantity":1}`, `{"quantity":null}`, `{}`, `null`, ` {"quantity" : 3 } `, `{"QUANTITY":2}`,
		`{"quantity":1}{}`, `{"quantity":1,"quantity":2}`, `{"quantity":1e2}`, `[1]`, `"x"`, ``,
		`{"id":"s1","name":"Phone","price_cents":99900,"stock":100,"holdback":2,"starts_at":"2030-01-01T00:00:00Z",` +
			`"ends_at":"2030-01-01T01:00:00.123456789+08:00","per_user_limit":1,"hold_seconds":60,"queue_limit":0}`,
		`{"starts_at":"2030-01-01T00:00:00-00:00"}`, `{"name":"\ud800 \u00e9 \xff"}`, `{"stock":-0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var b1 httpapi.BuyBody
		if httpapi.DecodeStrict(data, &b1) == nil {
			enc, err := json.Marshal(b1)
			if err != nil {
				t.Fatalf("accepted %q but cannot re-encode %+v: %v", data, b1, err)
			}
			var b2 httpapi.BuyBody
			if err := httpapi.DecodeStrict(enc, &b2); err != nil {
				t.Fatalf("accepted %q, re-encoded as %s, then refused it: %v", data, enc, err)
			}
			if !reflect.DeepEqual(b1, b2) {
				t.Fatalf("round trip of %q: %+v then %+v", data, b1, b2)
			}
		}
		var s1 seckill.SaleInput
		if httpapi.DecodeStrict(data, &s1) == nil {
			enc, err := json.Marshal(s1)
			if err != nil {
				t.Fatalf("accepted %q but cannot re-encode it: %v", data, err)
			}
			var s2 seckill.SaleInput
			if err := httpapi.DecodeStrict(enc, &s2); err != nil {
				t.Fatalf("accepted %q, re-encoded as %s, then refused it: %v", data, enc, err)
			}
			if !saleInputEqual(s1, s2) {
				t.Fatalf("round trip of %q: %+v then %+v", data, s1, s2)
			}
		}
	})
}

// saleInputEqual compares sale inputs field by field; times compare as instants with the same
// UTC offset (a decoded "+00:00" and "Z" differ only in their *Location pointer).
func saleInputEqual(a, b seckill.SaleInput) bool {
	timeEq := func(x, y *time.Time) bool {
		if x == nil || y == nil {
			return x == y
		}
		_, ox := x.Zone()
		_, oy := y.Zone()
		return x.Equal(*y) && ox == oy
	}
	ta, tb := a, b
	ta.StartsAt, ta.EndsAt, tb.StartsAt, tb.EndsAt = nil, nil, nil, nil
	return reflect.DeepEqual(ta, tb) && timeEq(a.StartsAt, b.StartsAt) && timeEq(a.EndsAt, b.EndsAt)
}

// checkResponse fails on a 5xx and on any answer that is not JSON of the right content type:
// application/json for 2xx, application/problem+json (whose status and code agree with the
// HTTP status) otherwise.
func checkResponse(t *testing.T, r response) {
	t.Helper()
	if r.Status >= 500 {
		t.Fatalf("server error: %s", r)
	}
	ct := r.Header.Get("Content-Type")
	if r.Status < 300 {
		if ct != "application/json" || !json.Valid(r.Body) {
			t.Fatalf("success without JSON: %s %q", r, ct)
		}
		return
	}
	if ct != "application/problem+json" {
		t.Fatalf("error is %q, not problem+json: %s", ct, r)
	}
	var p httpapi.Problem
	if err := json.Unmarshal(r.Body, &p); err != nil || p.Status != r.Status || p.Code == "" || httpapi.StatusOf(p.Code) != r.Status {
		t.Fatalf("bad problem document (%v): %s", err, r)
	}
}

// engineStock reads a sale's counts in process (it also reclaims lapsed holds).
func (e *env) engineStock(t *testing.T, id string) seckill.StockState {
	t.Helper()
	v, err := e.svc.Sale(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	st := v.StockState
	if st.Available < 0 || st.Held < 0 || st.Sold < 0 || st.Queued < 0 || st.Available+st.Held+st.Sold != st.Sellable {
		t.Fatalf("invariant broken: %+v", st)
	}
	return st
}

// FuzzBuyHandler sends fuzzed bodies, Idempotency-Keys and purchase tokens through the real buy
// handler. It must never answer 5xx or non-JSON, and stock_state must not change unless the
// answer was 201 held (held += q) or 202 queued (queued += q). The clock moves a second per
// input, so holds (30 s) keep lapsing and the sale cycles through free, held and queued units.
func FuzzBuyHandler(f *testing.F) {
	e := newEnv(f, withServer(func(c *httpapi.Config) { c.BuyRate = -1 }))
	e.createSale(f, "f", map[string]any{
		"stock": 40, "per_user_limit": 25, "queue_limit": 5, "hold_seconds": 30, "ends_at": t0.AddDate(100, 0, 0),
	})
	tok, err := httpapi.MintToken([]byte(authSecret), "fuzzer", t0, 200*365*24*time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	auth := "Bearer " + tok
	path := e.path(f, "fuzzer", "f")
	valid := path[strings.LastIndexByte(path, '/')+1:]

	for _, s := range []struct {
		body, key, token string
		useValid         bool
	}{
		{`{"quantity":1}`, "", "", true},
		{``, "k1", "", true},
		{`{"quantity":5}`, "k2", "", true},
		{`{"quantity":20}`, "", "", true},
		{`{"quantity":0}`, "", "", true},
		{`{"quantity":-1}`, "", "", true},
		{`{"quantity":26}`, "", "", true},
		{`{"quantity":"1"}`, "", "", true},
		{`{"quantity":1,"x":1}`, "", "", true},
		{`{"quantity":1}` + "\n" + `{"quantity":1}`, "", "", true},
		{`{"quantity":1}`, strings.Repeat("k", 129), "", true},
		{`{"quantity":1}`, "", valid, false},
		{`{"quantity":1}`, "", "AAAA", false},
		{`{"quantity":1}`, "", "", false},
		{`{"quantity":1}`, "", valid + "/x", false},
	} {
		f.Add([]byte(s.body), s.key, s.token, s.useValid)
	}
	f.Fuzz(func(t *testing.T, body []byte, key, token string, useValid bool) {
		if token == "." || token == ".." {
			t.Skip("ServeMux redirects dot segments to the cleaned path before any handler runs")
		}
		e.clock.Advance(time.Second)
		target := path
		if !useValid {
			target = "/api/v1/sales/f/buy/" + url.PathEscape(token)
		}
		before := e.engineStock(t, "f")
		var h []string
		if key != "" {
			h = []string{"Idempotency-Key", key}
		}
		r := e.serve("POST", target, auth, bytes.NewReader(body), h...)
		checkResponse(t, r)
		after := e.engineStock(t, "f")

		if !useValid && token != valid && r.Status < 300 {
			t.Fatalf("token %q accepted: %s", token, r)
		}
		switch r.Status {
		case http.StatusCreated, http.StatusAccepted:
			var res seckill.Reservation
			if err := json.Unmarshal(r.Body, &res); err != nil {
				t.Fatal(err)
			}
			want := before
			if r.Status == http.StatusCreated {
				want.Available -= res.Quantity
				want.Held += res.Quantity
			} else {
				want.Queued += res.Quantity
			}
			if res.Quantity < 1 || after != want {
				t.Fatalf("buy %s: stock %+v → %+v, want %+v", r, before, after, want)
			}
		default:
			if after != before {
				t.Fatalf("%s changed stock %+v → %+v", r, before, after)
			}
		}
	})
}

// FuzzWebhookHandler sends fuzzed bodies and signature headers through the real webhook
// handler. In the body, {RID} and {AMT} become the id and amount of a live held reservation and
// {PID} a fresh payment id, so the fuzzer reaches the payment rules, not only the parser. The
// handler must never answer 5xx or non-JSON; an unsigned (fuzzed-header) delivery or one
// signed more than 5 minutes off must be 401; stock_state may change only for an applied or
// late_applied payment, and then only by moving units into sold.
func FuzzWebhookHandler(f *testing.F) {
	e := newEnv(f, withServer(func(c *httpapi.Config) { c.BuyRate = -1 }))
	e.createSale(f, "w", map[string]any{
		"stock": 1000, "per_user_limit": 1000, "hold_seconds": 30, "ends_at": t0.AddDate(100, 0, 0),
	})
	ctx := context.Background()
	// cur is the held reservation {RID} names. When its buyer reaches the per-user limit or the
	// sale sells out, the next buyer or the next sale takes over.
	var cur seckill.Reservation
	saleID, payer, pid, gen := "w", "payer", 0, 0
	refill := func(t *testing.T) {
		if r, err := e.svc.Reservation(ctx, cur.ID, payer); err == nil && r.Status == seckill.StatusHeld {
			return
		}
		for range 3 {
			res, err := e.svc.Buy(ctx, seckill.BuyRequest{SaleID: saleID, UserID: payer, Quantity: 1})
			switch seckill.ErrorCode(err) {
			case "":
				cur = res.Reservation
				return
			case seckill.CodeLimitExceeded:
				gen++
				payer = "payer" + strconv.Itoa(gen)
			case seckill.CodeSoldOut, seckill.CodeQueueFull:
				gen++
				saleID = "w" + strconv.Itoa(gen)
				e.createSale(t, saleID, map[string]any{"stock": 1000, "per_user_limit": 1000, "hold_seconds": 30, "ends_at": t0.AddDate(100, 0, 0)})
			default:
				t.Fatalf("cannot refill the held reservation: %v", err)
			}
		}
		t.Fatal("cannot refill the held reservation")
	}

	for _, s := range []struct {
		body, header string
		sign         bool
		skew         int64
	}{
		{`{"payment_id":"{PID}","reservation_id":"{RID}","amount_cents":{AMT},"status":"succeeded"}`, "", true, 0},
		{`{"payment_id":"fixed","reservation_id":"{RID}","amount_cents":{AMT},"status":"succeeded"}`, "", true, 0},
		{`{"payment_id":"{PID}","reservation_id":"{RID}","amount_cents":1,"status":"succeeded"}`, "", true, 0},
		{`{"payment_id":"{PID}","reservation_id":"{RID}","amount_cents":{AMT},"status":"failed"}`, "", true, 0},
		{`{"payment_id":"{PID}","reservation_id":"w-00000000000000000000000000000000","amount_cents":1,"status":"succeeded"}`, "", true, 0},
		{`{"payment_id":"{PID}","reservation_id":"{RID}","amount_cents":{AMT},"status":"succeeded","extra":[1,{"a":null}]}`, "", true, 0},
		{`{"payment_id":"{PID}","reservation_id":"{RID}","amount_cents":{AMT},"status":"succeeded"}`, "", true, -301},
		{`{"payment_id":"{PID}","reservation_id":"{RID}","amount_cents":{AMT},"status":"succeeded"}`, "", true, 301},
		{`{"payment_id":"{PID}","reservation_id":"{RID}","amount_cents":{AMT},"status":"succeeded"}`, "t=1,v1=00", false, 0},
		{`{"payment_id":"p","reservation_id":"r","amount_cents":1,"status":"succeeded"}`, "", false, 0},
		{`{"payment_id":"p","payment_id":"q","reservation_id":"{RID}","amount_cents":{AMT},"status":"succeeded"}`, "", true, 0},
		{`{`, "", true, 0},
		{``, "t=,v1=", false, 0},
		{`null`, "v1=ab, t=99999999999999999999", false, 0},
	} {
		f.Add([]byte(s.body), s.header, s.sign, s.skew)
	}
	f.Fuzz(func(t *testing.T, body []byte, header string, sign bool, skew int64) {
		e.clock.Advance(time.Second)
		now := e.clock.Now()
		refill(t)
		pid++
		body = []byte(strings.NewReplacer(
			"{RID}", cur.ID, "{AMT}", strconv.FormatInt(cur.AmountCents, 10), "{PID}", "pay-fuzz-"+strconv.Itoa(pid),
		).Replace(string(body)))
		skew %= 601 // ±10 minutes, around the 5-minute tolerance
		if sign {
			header = payment.Sign([]byte(paySecret), now.Add(time.Duration(skew)*time.Second), body)
		}
		before := e.engineStock(t, cur.SaleID)
		r := e.serve("POST", webhookURL, "", bytes.NewReader(body), payment.SignatureHeader, header)
		checkResponse(t, r)
		after := e.engineStock(t, cur.SaleID)

		stale := skew > 300 || skew < -300
		if (!sign || stale) && r.Status != http.StatusUnauthorized && r.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("delivery signed=%v skew=%ds header %q answered %s", sign, skew, header, r)
		}
		var got struct{ Result seckill.PaymentResult }
		if r.Status == http.StatusOK {
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatal(err)
			}
		}
		if got.Result.Paid() {
			q := after.Sold - before.Sold
			if q < 1 || after.Sellable != before.Sellable || after.Queued != before.Queued ||
				before.Available+before.Held-after.Available-after.Held != q {
				t.Fatalf("%s: stock %+v → %+v", r, before, after)
			}
		} else if after != before {
			t.Fatalf("%s changed stock %+v → %+v", r, before, after)
		}
	})
}
