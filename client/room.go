package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/url"
	"strconv"
	"time"
)

// A sale's waiting room (docs/API.md "The waiting room"): its public view and entrant list,
// and a buyer's join, proof-of-work challenge, ticket and live ticket.

// RoomView is GET /api/v1/sales/{id}/waiting-room: the room's policy, commitment (and seed
// from the start on) and counts. (WaitingRoom is NewSale's room.)
type RoomView struct {
	SaleID     string    `json:"sale_id"`
	Order      string    `json:"order"`
	OpensAt    time.Time `json:"opens_at"`
	StartsAt   time.Time `json:"starts_at"`
	Commitment string    `json:"commitment"`
	Seed       *string   `json:"seed"` // hex, from starts_at on
	Entrants   int64     `json:"entrants"`
	PreQueue   int64     `json:"pre_queue"`
	Admitted   int64     `json:"admitted"`
	Waiting    int64     `json:"waiting"`
	Active     int64     `json:"active"`
	Closed     *string   `json:"closed"` // nil while admitting; "sold_out" or "ended"
	// ClosedAt is when the room closed (nil while admitting): the instant the last unit was
	// paid or the sale ended was seen by the room's admission, on the engine's clock.
	ClosedAt       *time.Time `json:"closed_at"`
	AdmitPerSecond int        `json:"admit_per_second"`
	MaxActive      int        `json:"max_active"`
	TokenSeconds   int        `json:"token_seconds"`
	PowBits        int        `json:"pow_bits"`
	ServerTime     time.Time  `json:"server_time"`
}

// Ticket is a buyer's place in a sale's waiting room.
type Ticket struct {
	SaleID             string     `json:"sale_id"`
	Entrant            string     `json:"entrant"`
	State              string     `json:"state"` // seckill.TicketPreQueue, TicketWaiting, …
	Index              int64      `json:"index"`
	Position           int64      `json:"position"`
	Ahead              int64      `json:"ahead"`
	Drawn              bool       `json:"drawn"`
	JoinedAt           time.Time  `json:"joined_at"`
	AdmittedAt         *time.Time `json:"admitted_at,omitempty"`
	WaitP50            *float64   `json:"wait_p50_seconds"`
	WaitP90            *float64   `json:"wait_p90_seconds"`
	AdmissionToken     string     `json:"admission_token,omitempty"`
	AdmissionExpiresAt *time.Time `json:"admission_expires_at,omitempty"`
	ServerTime         time.Time  `json:"server_time"`
}

// Challenge is a proof-of-work challenge for joining (package pow solves it: pow.Solve).
type Challenge struct {
	Challenge string    `json:"challenge"`
	Bits      int       `json:"bits"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Proof is a solved challenge, sent with a first join to a room with pow_bits.
type Proof struct {
	Challenge string `json:"challenge"`
	Solution  string `json:"solution"`
}

// EntrantPage is one page of GET .../waiting-room/entrants.
type EntrantPage struct {
	Entrants []string `json:"entrants"`
	Next     string   `json:"next,omitempty"`
}

func roomPath(saleID string) string { return salePath(saleID) + "/waiting-room" }

// WaitingRoom reads the sale's room.
func (c *Client) WaitingRoom(ctx context.Context, saleID string) (RoomView, error) {
	var out RoomView
	_, err := c.do(ctx, call{method: "GET", path: roomPath(saleID), out: &out})
	return out, err
}

// JoinRoom joins the sale's room (idempotent); proof is needed on a first join to a room with
// pow_bits (nil: none).
func (c *Client) JoinRoom(ctx context.Context, saleID string, proof *Proof) (Ticket, error) {
	body := []byte(`{}`)
	if proof != nil {
		body, _ = json.Marshal(map[string]*Proof{"pow": proof})
	}
	var out Ticket
	_, err := c.do(ctx, call{method: "POST", path: roomPath(saleID) + "/join", body: body, out: &out})
	return out, err
}

// RoomChallenge is a proof-of-work challenge for joining the sale's room.
func (c *Client) RoomChallenge(ctx context.Context, saleID string) (Challenge, error) {
	var out Challenge
	_, err := c.do(ctx, call{method: "GET", path: roomPath(saleID) + "/challenge", out: &out})
	return out, err
}

// Ticket is the caller's ticket in the sale's room (not_found before joining).
func (c *Client) Ticket(ctx context.Context, saleID string) (Ticket, error) {
	var out Ticket
	_, err := c.do(ctx, call{method: "GET", path: roomPath(saleID) + "/ticket", out: &out})
	return out, err
}

// Entrants is one page of the room's draw entrants, after the id after ("": the first
// page), at most limit (0: the server's default); only from the sale's start on.
func (c *Client) Entrants(ctx context.Context, saleID, after string, limit int) (EntrantPage, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := roomPath(saleID) + "/entrants"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out EntrantPage
	_, err := c.do(ctx, call{method: "GET", path: path, out: &out})
	return out, err
}

// AdmittedPath is Path for a sale with a waiting room: the admission token (the admitted
// Ticket's AdmissionToken) goes in the header Seckill-Admission.
func (c *Client) AdmittedPath(ctx context.Context, saleID, admission string) (PurchasePath, error) {
	var out PurchasePath
	_, err := c.do(ctx, call{method: "GET", path: salePath(saleID) + "/path", header: []string{"Seckill-Admission", admission}, out: &out})
	return out, err
}

// RoomEvents is GET .../waiting-room/events: the caller's ticket, live, as a sequence (on
// connect, then whenever its state or admission changes, and its place at most about once a
// second). It ends as Events does.
func (c *Client) RoomEvents(ctx context.Context, saleID string) iter.Seq2[Ticket, error] {
	return func(yield func(Ticket, error) bool) {
		for ev, err := range c.stream(ctx, roomPath(saleID)+"/events") {
			if err != nil {
				yield(Ticket{}, err)
				return
			}
			if ev.Ticket != nil && !yield(*ev.Ticket, nil) {
				return
			}
		}
	}
}
