package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/paths"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/payment"
	"github.com/seckill-go/seckill/pow"
)

// TestClientFollowsTheDocument runs every operation of the client through a transport that
// checks each request and each answer against the OpenAPI document the server serves, with
// libopenapi-validator (formats asserted), and fails on anything off the document, or on an
// operation of /api/v1 the client never called: the client is handwritten, and this keeps it
// honest.
func TestClientFollowsTheDocument(t *testing.T) {
	vt := newValidatingTransport(t)
	c := client.New(serverURL, client.WithHTTPClient(&http.Client{Transport: vt}))
	contractJourney(t, c)
	vt.mu.Lock()
	defer vt.mu.Unlock()
	for _, bad := range vt.bad {
		t.Error(bad)
	}
	var missed []string
	for _, op := range vt.ops {
		if !vt.seen[op] && !notTheClients[op] {
			missed = append(missed, op)
		}
	}
	if len(missed) > 0 {
		t.Errorf("operations of the document the client never called: %v", missed)
	}
}

// notTheClients are the document's operations the client leaves to others: the document itself.
var notTheClients = map[string]bool{"openapi": true}

// contractJourney calls every operation, with answers of success and of refusal.
func contractJourney(t *testing.T, admin *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin = admin.WithToken(adminToken)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused := func(what string, err error, code seckill.Code) {
		t.Helper()
		if got := client.CodeOf(err); got != code {
			t.Errorf("%s: %v, want %s", what, err, code)
		}
	}
	_, err := admin.SignIn(ctx)
	must("sign-in", err)
	_, err = admin.Ready(ctx)
	must("ready", err)
	must("health", admin.Health(ctx))
	created, err := admin.CreateSale(ctx, client.NewSale{ID: "contract-a", Name: "A", PriceCents: 500, Stock: 2,
		PerUserLimit: 2, HoldSeconds: 30, QueueLimit: client.Ptr(5), Currency: "eur", Listed: client.Ptr(false), Segments: 1,
		PreheatSeconds: client.Ptr(0)})
	must("create", err)
	if created.PreheatSeconds != 0 {
		t.Errorf("created with preheat_seconds 0: %d", created.PreheatSeconds)
	}
	_, err = admin.CreateSale(ctx, client.NewSale{ID: "contract-a", PriceCents: 1, Stock: 1})
	refused("create again", err, seckill.CodeConflict)
	// A waiting room: every field sent (order, opens_seconds 0, pow_bits) reads back as sent, in
	// the create's answer and in a read; one with the fields left out reads back with the
	// server's defaults; one the server refuses is invalid_argument.
	room := client.WaitingRoom{Order: seckill.RoomFIFO, OpensSeconds: client.Ptr(0), AdmitPerSecond: 7, MaxActive: 3,
		TokenSeconds: 30, PowBits: 2}
	wantRoom := seckill.RoomPolicy{Order: seckill.RoomFIFO, AdmitPerSecond: 7, MaxActive: 3, TokenSeconds: 30, PowBits: 2}
	created, err = admin.CreateSale(ctx, client.NewSale{ID: "contract-room", PriceCents: 1, Stock: 1, Listed: client.Ptr(false),
		StartsAt: time.Now().Add(time.Hour), WaitingRoom: &room})
	must("create with a waiting room", err)
	if created.Room == nil || *created.Room != wantRoom {
		t.Errorf("created with waiting_room %+v: answered %+v", wantRoom, created.Room)
	}
	read, err := admin.Sale(ctx, "contract-room")
	must("read the sale with a waiting room", err)
	if read.Room == nil || *read.Room != wantRoom {
		t.Errorf("created with waiting_room %+v: read %+v", wantRoom, read.Room)
	}
	created, err = admin.CreateSale(ctx, client.NewSale{ID: "contract-room-defaults", PriceCents: 1, Stock: 1,
		Listed: client.Ptr(false), StartsAt: time.Now().Add(time.Hour), WaitingRoom: &client.WaitingRoom{MaxActive: 1}})
	must("create with a waiting room of defaults", err)
	if want := (seckill.RoomPolicy{Order: seckill.RoomDraw, OpensSeconds: seckill.DefaultPreheatSeconds, MaxActive: 1,
		TokenSeconds: seckill.DefaultTokenSeconds}); created.Room == nil || *created.Room != want {
		t.Errorf("created with waiting_room {max_active: 1}: answered %+v, want %+v", created.Room, want)
	}
	_, err = admin.CreateSale(offDocument(ctx), client.NewSale{ID: "contract-room-bad", PriceCents: 1, Stock: 1,
		WaitingRoom: &client.WaitingRoom{Order: seckill.RoomDraw}})
	refused("a waiting room without a bound", err, seckill.CodeInvalidArgument)
	if read, err := admin.Sale(ctx, "contract-a"); err != nil || read.Room != nil {
		t.Errorf("a sale created without a waiting room reads %+v, %v", read.Room, err)
	}
	page, err := admin.ListSales(ctx, client.ListOptions{All: true, Limit: 1})
	must("list all", err)
	if page.NextCursor != "" {
		_, err = admin.ListSales(ctx, client.ListOptions{All: true, Limit: 1, Cursor: page.NextCursor})
		must("list all, next page", err)
	}
	_, err = admin.WithToken("").ListSales(ctx, client.ListOptions{Status: "selling"})
	must("list", err)
	_, err = admin.WithToken("").ListSales(ctx, client.ListOptions{Cursor: "not-ours"})
	refused("list at a cursor not the server's", err, seckill.CodeInvalidArgument)
	walked := 0
	for _, err := range admin.Sales(ctx, client.ListOptions{All: true, Limit: 1}) {
		must("walk the list", err)
		walked++
	}
	if walked == 0 {
		t.Error("walk of every sale: none, want contract-a at least")
	}
	_, err = admin.Sale(ctx, "contract-nope")
	refused("unknown sale", err, seckill.CodeNotFound)
	_, err = admin.SetListed(ctx, "contract-a", true)
	must("list it", err)
	_, err = admin.AddStock(ctx, "contract-a", 1)
	must("add stock", err)

	tok := func(user string) *client.Client {
		s, err := admin.DevToken(ctx, user)
		must("dev token", err)
		return admin.WithToken(s)
	}
	a, b, d := tok("contract-alice"), tok("contract-bob"), tok("contract-dora")
	_, err = admin.WithToken("").Path(offDocument(ctx), "contract-a")
	refused("path without a token", err, seckill.CodeUnauthorized)
	pa, err := a.Path(ctx, "contract-a")
	must("path", err)
	held, err := a.Buy(ctx, pa.Path, 2, "contract-key")
	must("buy", err)
	_, err = a.Buy(ctx, pa.Path, 1, "contract-key")
	must("replay", err)
	pb, _ := b.Path(ctx, "contract-a")
	_, err = b.Buy(ctx, pb.Path, 1, "")
	must("buy the last", err)
	pd, _ := d.Path(ctx, "contract-a")
	queued, err := d.Buy(ctx, pd.Path, 1, "")
	must("queue", err)
	_, err = d.Buy(ctx, pd.Path, 5, "")
	refused("too many", err, seckill.CodeLimitExceeded)
	_, err = d.Reservation(ctx, queued.ID)
	must("read", err)
	_, err = d.Cancel(ctx, queued.ID)
	must("cancel", err)
	_, err = d.Pay(ctx, queued.ID)
	refused("pay a cancelled one", err, seckill.CodeHoldExpired)

	for ev, err := range a.Events(ctx, "contract-a", held.ID) {
		must("events", err)
		if ev.Type == client.EventReservation {
			break
		}
	}
	_, err = a.Webhook(ctx, []byte(paymentSecret), payment.Event{PaymentID: "contract-pay-a", ReservationID: held.ID,
		AmountCents: held.AmountCents, Status: payment.StatusSucceeded})
	must("webhook", err)
	_, err = a.Notify(ctx, payment.WebhookName, func(now time.Time) payment.SignedBody {
		return payment.Signed([]byte(paymentSecret), now, []byte(`{"payment_id":"contract-pay-x","reservation_id":"contract-a-x","amount_cents":1,"status":"failed"}`))
	})
	must("gateway webhook", err)
	_, err = a.Notify(ctx, "nope", func(now time.Time) payment.SignedBody {
		return payment.Signed([]byte(paymentSecret), now, []byte(`{}`))
	})
	refused("an unknown gateway", err, seckill.CodeNotFound)
	_, err = a.Orders(ctx)
	must("orders", err)
	_, err = admin.Audit(ctx, "contract-a")
	must("audit", err)
	_, err = a.Audit(ctx, "contract-a")
	refused("audit as a user", err, seckill.CodeForbidden)
	_, err = admin.Refunds(ctx, seckill.RefundRequired, 5)
	must("refunds", err)
	_, err = admin.Refunds(offDocument(ctx), "nope", 0)
	refused("refunds of no status", err, seckill.CodeInvalidArgument)
	_, err = admin.Export(ctx)
	must("export", err)
	hot, err := admin.Hot(ctx)
	must("hot", err)
	if hot.Hot < 1 || !slices.Contains(hot.Sales, "contract-a") {
		t.Errorf("hot: %+v, want contract-a among the hot sales", hot)
	}
	_, err = a.Hot(ctx)
	refused("hot as a user", err, seckill.CodeForbidden)
	_, err = admin.Activity(ctx, "contract-a")
	must("activity", err)
	refused("delete a sale with reservations", admin.DeleteSale(ctx, "contract-a"), seckill.CodeConflict)
	_, err = admin.CloseSale(ctx, "contract-a")
	must("close", err)
	_, err = a.Path(ctx, "contract-a")
	refused("path of a closed sale", err, seckill.CodeEnded)
	_, err = admin.CreateSale(ctx, client.NewSale{ID: "contract-b", PriceCents: 0, Stock: 1, StartsAt: time.Now().Add(time.Hour)})
	must("create an upcoming one", err)
	_, err = a.Path(ctx, "contract-b")
	refused("path of an upcoming sale", err, seckill.CodeNotStarted)
	must("delete", admin.DeleteSale(ctx, "contract-b"))

	// A started sale with a waiting room and a proof of work: challenge, join, ticket, the live
	// ticket, admission, the admitted path and a buy, the room and its entrants.
	_, err = admin.CreateSale(ctx, client.NewSale{ID: "contract-open-room", PriceCents: 100, Stock: 2, PerUserLimit: 1,
		Listed: client.Ptr(false), StartsAt: time.Now().Add(-time.Second), EndsAt: time.Now().Add(time.Hour),
		WaitingRoom: &client.WaitingRoom{AdmitPerSecond: 100, PowBits: 2}})
	must("create an open room", err)
	_, err = b.JoinRoom(ctx, "contract-open-room", nil)
	refused("join without proof", err, seckill.CodePowRequired)
	ch, err := b.RoomChallenge(ctx, "contract-open-room")
	must("challenge", err)
	sol, err := pow.Solve(ctx, ch.Challenge, ch.Bits)
	must("solve", err)
	_, err = b.JoinRoom(ctx, "contract-open-room", &client.Proof{Challenge: ch.Challenge, Solution: sol})
	must("join", err)
	_, err = b.AdmittedPath(ctx, "contract-open-room", "")
	refused("path without admission", err, seckill.CodeAdmissionRequired)
	for tk, err := range b.RoomEvents(ctx, "contract-open-room") {
		must("room events", err)
		if tk.State == seckill.TicketAdmitted {
			break
		}
	}
	tk, err := b.Ticket(ctx, "contract-open-room")
	must("ticket", err)
	if tk.State != seckill.TicketAdmitted || tk.AdmissionToken == "" {
		t.Fatalf("admitted ticket: %+v", tk)
	}
	rp, err := b.AdmittedPath(ctx, "contract-open-room", tk.AdmissionToken)
	must("admitted path", err)
	_, err = b.Buy(ctx, rp.Path, 1, "")
	must("buy after admission", err)
	rv, err := admin.WaitingRoom(ctx, "contract-open-room")
	must("room", err)
	if rv.Seed == nil || rv.Admitted != 1 {
		t.Errorf("room after the start: %+v", rv)
	}
	_, err = admin.Entrants(ctx, "contract-open-room", "", 0)
	must("entrants", err)

	// The waiting room's operations on a sale without a room: each answers its documented 404.
	_, err = admin.WaitingRoom(ctx, "contract-a")
	refused("room of a sale without one", err, seckill.CodeNotFound)
	_, err = a.JoinRoom(ctx, "contract-a", nil)
	refused("join a sale without a room", err, seckill.CodeNotFound)
	_, err = a.JoinRoom(ctx, "contract-a", &client.Proof{Challenge: "c", Solution: "1"})
	refused("join with a proof", err, seckill.CodeNotFound)
	_, err = a.RoomChallenge(ctx, "contract-a")
	refused("challenge", err, seckill.CodeNotFound)
	_, err = a.Ticket(ctx, "contract-a")
	refused("ticket", err, seckill.CodeNotFound)
	_, err = admin.Entrants(ctx, "contract-a", "", 10)
	refused("entrants", err, seckill.CodeNotFound)
	for _, err := range a.RoomEvents(ctx, "contract-a") {
		refused("room events", err, seckill.CodeNotFound)
		break
	}
	_, err = a.AdmittedPath(ctx, "contract-a", "x")
	refused("admitted path of a closed sale", err, seckill.CodeEnded)
}

// offDocument marks the requests a test sends off the document on purpose (no token, a bad
// parameter), to see the client's refusals: the transport then checks they are off it.
func offDocument(ctx context.Context) context.Context {
	return context.WithValue(ctx, offDocumentKey{}, true)
}

type offDocumentKey struct{}

// validatingTransport checks every exchange against the served document.
type validatingTransport struct {
	v     validator.Validator
	model *v3.Document
	ids   map[string]map[string]string // path → method → operationId
	ops   []string

	mu   sync.Mutex
	seen map[string]bool
	bad  []string
}

func newValidatingTransport(t *testing.T) *validatingTransport {
	t.Helper()
	resp, err := http.Get(serverURL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		t.Fatal(err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	vt := &validatingTransport{model: &model.Model, seen: map[string]bool{}, ids: map[string]map[string]string{}}
	vt.v = validator.NewValidatorFromV3Model(&model.Model, config.WithFormatAssertions())
	var ids struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &ids); err != nil {
		t.Fatal(err)
	}
	for p, item := range ids.Paths {
		vt.ids[p] = map[string]string{}
		for m, op := range item {
			if op.OperationID != "" {
				vt.ids[p][strings.ToUpper(m)] = op.OperationID
				vt.ops = append(vt.ops, op.OperationID)
			}
		}
	}
	slices.Sort(vt.ops)
	return vt
}

func (vt *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	again := func() *http.Request {
		r := req.Clone(req.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		return r
	}
	what := req.Method + " " + req.URL.RequestURI()
	if _, errs, template := paths.FindPath(again(), vt.model, nil); len(errs) == 0 {
		vt.note(vt.ids[template][req.Method], "")
	} else {
		vt.note("", what+": not in the document")
	}
	ok, errs := vt.v.ValidateHttpRequest(again())
	switch invalid, _ := req.Context().Value(offDocumentKey{}).(bool); {
	case !ok && !invalid:
		vt.note("", what+": request off the document: "+describe(errs))
	case ok && invalid:
		vt.note("", what+": a request meant to be off the document passes it")
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err // a stream is read by the client; its events are the Sale and Reservation schemas
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	check := *resp
	check.Body = io.NopCloser(bytes.NewReader(answer))
	if ok, errs := vt.v.ValidateHttpResponse(again(), &check); !ok {
		vt.note("", fmt.Sprintf("%s: answer %d off the document: %s (%s)", what, resp.StatusCode, describe(errs), answer))
	}
	return resp, nil
}

func (vt *validatingTransport) note(op, bad string) {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	if op != "" {
		vt.seen[op] = true
	}
	if bad != "" {
		vt.bad = append(vt.bad, bad)
	}
}

// describe renders validation errors on one line.
func describe(errs []*verrors.ValidationError) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = fmt.Sprintf("%s (%v)", e.Error(), e.SchemaValidationErrors)
	}
	return strings.Join(parts, "; ")
}
