package client

import (
	"time"

	"github.com/seckill-go/seckill"
)

// The shapes of the API's bodies (docs/API.md; the schemas of GET /openapi.json). Where the
// root package has the shape already (seckill.Reservation, seckill.Order, seckill.Refund,
// seckill.StockState…) the client uses it; the types here are the answers made of several.

// Sale is the Sale JSON: a sale with its live stock, its derived status and the server's clock
// when it answered (compare the sale's times to ServerTime, not to the local clock).
type Sale struct {
	seckill.Sale
	Status     seckill.SaleStatus `json:"status"`
	StockState seckill.StockState `json:"stock_state"`
	ServerTime time.Time          `json:"server_time"`
}

// NewSale is the body of CreateSale. Only PriceCents and Stock are required; a field left at
// its zero value takes the server's default (docs/API.md, Create a sale), except where a zero
// means something of its own: QueueLimit, Listed and PreheatSeconds are pointers for that (nil:
// the default, 10 × sellable, true and 300).
type NewSale struct {
	ID           string    `json:"id,omitempty"`   // default: 16 random hex digits
	Name         string    `json:"name,omitempty"` // default: the id
	PriceCents   int64     `json:"price_cents"`    // 0: a free sale (a giveaway)
	Stock        int       `json:"stock"`
	Holdback     int       `json:"holdback,omitempty"`
	StartsAt     time.Time `json:"starts_at,omitzero"`      // default: now
	EndsAt       time.Time `json:"ends_at,omitzero"`        // default: StartsAt + 1 h
	PerUserLimit int       `json:"per_user_limit,omitzero"` // default: 1
	HoldSeconds  int       `json:"hold_seconds,omitzero"`   // default: 60
	QueueLimit   *int      `json:"queue_limit,omitempty"`   // buyers; 0: no queue
	Currency     string    `json:"currency,omitempty"`      // ISO 4217, lower case; default "usd"
	Listed       *bool     `json:"listed,omitempty"`        // false keeps it off the storefront's list
	Segments     int       `json:"segments,omitzero"`       // default 1 (Redis engine only: more)
	// PreheatSeconds is how long before StartsAt the sale becomes hot (0 … 86 400; 0: from
	// StartsAt); default 300.
	PreheatSeconds *int `json:"preheat_seconds,omitempty"`
	// WaitingRoom puts the sale's crowd in a waiting room before the purchase path
	// (docs/API.md "The waiting room"); nil: none. A sale's room never changes, and it is read
	// back as Sale.Room.
	WaitingRoom *WaitingRoom `json:"waiting_room,omitempty"`
}

// WaitingRoom is NewSale's waiting_room, with the field names of the API (seckill.RoomPolicy is
// what a Sale reads back, defaults filled). AdmitPerSecond or MaxActive (or both) must be above
// 0; a field left at its zero value takes the server's default, except OpensSeconds, a pointer
// since 0 (joining opens at the start) is a value of its own.
type WaitingRoom struct {
	Order          string `json:"order,omitempty"`           // seckill.RoomDraw (default) or seckill.RoomFIFO
	OpensSeconds   *int   `json:"opens_seconds,omitempty"`   // 0 … the sale's preheat_seconds; default: preheat_seconds
	AdmitPerSecond int    `json:"admit_per_second,omitzero"` // 0 … 1 000 000; 0: no bound on rate
	MaxActive      int    `json:"max_active,omitzero"`       // 0 … 10⁹; 0: no bound
	TokenSeconds   int    `json:"token_seconds,omitzero"`    // 10 … 3 600; default 120
	PowBits        int    `json:"pow_bits,omitzero"`         // 0 … 28; 0: no proof of work
}

// Ptr returns a pointer to v: for NewSale's QueueLimit, Listed and PreheatSeconds, and
// WaitingRoom's OpensSeconds.
func Ptr[T any](v T) *T { return &v }

// SaleList is the answer of ListSales: one page of sales by starts_at then id, where the next
// page starts ("" on the last), and the server's clock.
type SaleList struct {
	Sales      []Sale    `json:"sales"`
	NextCursor string    `json:"next_cursor,omitempty"`
	ServerTime time.Time `json:"server_time"`
}

// PurchasePath is the answer of Path: the secret path to buy at (Buy), valid for the whole
// sale (ExpiresAt is the sale's end).
type PurchasePath struct {
	Path      string    `json:"path"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Bought is the answer of Buy: the reservation, held or queued (its Status says which), and
// whether the buy was a replay of an earlier one with the same Idempotency-Key (answered 200,
// the reservation as it is now, which may have moved on since).
type Bought struct {
	seckill.Reservation
	Replayed bool `json:"-"`
}

// WebhookResult is the answer to a payment notification: what was done with it
// (seckill.PaymentResult: applied, late_applied, duplicate, refund_required, ignored).
type WebhookResult struct {
	Result seckill.PaymentResult `json:"result"`
}

// Audit is the answer of Audit: the invariants of docs/MODEL.md checked for one sale.
type Audit struct {
	OK         bool     `json:"ok"`
	Violations []string `json:"violations"`
	// Gateway is the gateway that takes this instance's payments: mock, webhook or stripe
	// ("" when none is configured).
	Gateway  string             `json:"gateway"`
	Engine   seckill.StockState `json:"engine"`
	Database seckill.DBCounts   `json:"database"`
}

// SinkStatus is where one sink of the event export stands on the instance that answered
// (docs/API.md, Event export).
type SinkStatus struct {
	Name         string  `json:"name"`
	Sink         string  `json:"sink"` // its URL, credentials redacted
	Published    uint64  `json:"published"`
	Failures     uint64  `json:"failures"`
	DeadLettered uint64  `json:"dead_lettered"`
	LagEvents    int64   `json:"lag_events"`
	LagSeconds   float64 `json:"lag_seconds"`
	FarBehind    bool    `json:"far_behind"`
}

// HotStatus is the answer of Hot: the instance's view of the hot and cold sales (docs/API.md,
// Hot and cold sales).
type HotStatus struct {
	Hot       int       `json:"hot"`   // sales in their hot window now
	Sales     []string  `json:"sales"` // the first 100 of them, in the sale list's order
	ColdCache ColdCache `json:"cold_cache"`
	Cooled    uint64    `json:"cooled"` // sales the instance cooled since it started (Redis engine)
	Loaded    uint64    `json:"loaded"` // sales it loaded from the database, preheated or cold ones changed again (Redis engine)
}

// ColdCache is what the instance's cold cache holds (Redis engine; zeros with memory).
type ColdCache struct {
	Entries int `json:"entries"`
	Max     int `json:"max"`
}

// Activity is the answer of Activity: this instance's buy outcomes per second for the last
// five minutes, and the holds expiring soonest (the dashboard's feed).
type Activity struct {
	SaleID          string                `json:"sale_id"`
	ServerTime      time.Time             `json:"server_time"`
	IntervalSeconds int                   `json:"interval_seconds"`
	Buckets         []ActivityBucket      `json:"buckets"`
	Expiring        []seckill.Reservation `json:"expiring"`
}

// ActivityBucket is one second of buy outcomes, counted by outcome ("held", "sold_out"…).
type ActivityBucket struct {
	At       time.Time         `json:"at"`
	Outcomes map[string]uint32 `json:"outcomes"`
}

// SignIn is the answer of SignIn: where the storefront sends buyers to sign in.
type SignIn struct {
	LoginURL  string `json:"login_url,omitempty"` // "" without OpenID Connect
	ClientID  string `json:"client_id,omitempty"`
	UserClaim string `json:"user_claim"`
	DevTokens bool   `json:"dev_tokens"` // DevToken hands out tokens (--dev)
}

// Readiness is the answer of Ready: whether this instance can serve buys, and its checks by
// name ("database", "redis") with "ok" or "unavailable".
type Readiness struct {
	Status       string            `json:"status"` // ready, or degraded (the database is down; buys work)
	Checks       map[string]string `json:"checks"`
	ExportBehind []string          `json:"export_behind,omitempty"` // export sinks a minute or more behind
}
