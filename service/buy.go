package service

import (
	"context"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/internal/purchasetoken"
)

// PurchasePath is what GET /sales/{id}/path answers, before the transport makes it a URL
// (httpapi): the user's purchase token for the sale, valid until the sale ends.
type PurchasePath struct {
	SaleID    string
	Token     string
	ExpiresAt time.Time
}

// PurchasePath returns the user's secret purchase token, only once the sale is active; a sale
// with a waiting room needs an admission (PurchasePathAdmitted).
func (s *Service) PurchasePath(ctx context.Context, saleID, userID string) (PurchasePath, error) {
	return s.PurchasePathAdmitted(ctx, saleID, userID, "")
}

// saleWindow is the sale's definition for a caller that needs no counts: Config.Windows when
// the service has it (cheaper), else the inventory's Sale.
func (s *Service) saleWindow(ctx context.Context, saleID string) (seckill.Sale, error) {
	if s.windows != nil {
		return s.windows.SaleWindow(ctx, saleID)
	}
	sale, _, err := s.inv.Sale(ctx, saleID)
	return sale, err
}

// purchaseToken is the user's purchase token for the sale.
func (s *Service) purchaseToken(sale seckill.Sale, userID string) string {
	return purchasetoken.New(s.pathKey, sale.ID, userID, sale.StartsAt)
}

// CheckPurchaseToken verifies that token is the purchase token of this user and sale. It runs
// before the body is read, so a forged URL costs no parsing (docs/API.md's check order).
//
// The sale's starts_at is cached after the first lookup, so that a buy costs one engine call
// (the buy itself) rather than two: on the Redis engine each is a round trip and a script.
func (s *Service) CheckPurchaseToken(ctx context.Context, saleID, token, userID string) error {
	f, err := s.facts(ctx, saleID)
	if err != nil {
		return err
	}
	if !purchasetoken.Valid(s.pathKey, saleID, userID, f.startsAt, token) {
		return seckill.Errorf(seckill.CodeInvalidToken, "purchase token is not valid for this user and sale")
	}
	return nil
}

// saleFacts are what the buy path needs of a sale and never changes once it exists: its
// start (the purchase token), whether it has a waiting room and its hold (releaseRoom).
type saleFacts struct {
	startsAt time.Time
	room     bool
	hold     time.Duration
}

// facts are the sale's saleFacts, cached after the first lookup (Service.starts).
func (s *Service) facts(ctx context.Context, saleID string) (saleFacts, error) {
	if v, ok := s.starts.Load(saleID); ok {
		return v.(saleFacts), nil
	}
	sale, _, err := s.inv.Sale(ctx, saleID)
	if err != nil {
		return saleFacts{}, err
	}
	f := saleFacts{startsAt: sale.StartsAt, room: sale.Room != nil, hold: sale.HoldDuration()}
	s.starts.Store(saleID, f)
	return f, nil
}

// Buy reserves units for a user whose purchase token has been checked. In a sale with a
// waiting room the buyer's outcome is then told to the room (releaseRoom).
func (s *Service) Buy(ctx context.Context, req seckill.BuyRequest) (seckill.BuyResult, error) {
	res, err := s.inv.Buy(ctx, req)
	if s.rooms != nil {
		if f, ferr := s.facts(ctx, req.SaleID); ferr == nil && f.room {
			s.releaseRoom(ctx, req, res, err)
		}
	}
	return res, err
}

// Reservation returns the user's reservation; another user's reads as not found.
func (s *Service) Reservation(ctx context.Context, id, userID string) (seckill.Reservation, error) {
	r, err := s.inv.Reservation(ctx, id)
	if err != nil {
		return seckill.Reservation{}, err
	}
	if r.UserID != userID {
		return seckill.Reservation{}, seckill.Errorf(seckill.CodeNotFound, "reservation %q not found", id)
	}
	return r, nil
}

// Cancel cancels the user's reservation.
//
// A payment started for the hold is then due for closing at the gateway at once rather than
// at the hold's expiry. If that cannot be written (the database is down) the cancel stands
// all the same: the close comes at the expiry the record already has, and a payment made
// before it follows the late rule.
func (s *Service) Cancel(ctx context.Context, id, userID string) (seckill.Reservation, error) {
	r, err := s.inv.Cancel(ctx, id, userID)
	if err != nil {
		return r, err
	}
	_ = s.store.CloseSoon(ctx, id, s.clock.Now())
	s.releaseOutcome(ctx, r)
	return r, nil
}
