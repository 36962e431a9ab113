package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill-go/seckill"
)

// SetListed lists the sale on the storefront or takes it off (PATCH /api/v1/sales/{id}). The
// engine is changed first, then the order store, which the list is read from.
func (s *Service) SetListed(ctx context.Context, saleID string, listed bool) (SaleView, error) {
	sale, st, err := s.inv.SetListed(ctx, saleID, listed)
	if err != nil {
		return SaleView{}, err
	}
	if err := s.store.UpdateSale(ctx, sale); err != nil {
		return SaleView{}, unavailable(err)
	}
	return s.view(sale, st), nil
}

// DeleteSale deletes a sale in which nobody has reserved (DELETE /api/v1/sales/{id}): from the
// engine and the order store, all or nothing. A sale with any reservation, in any status, is
// a conflict and is left as it was.
//
// A buy racing the delete must never leave a reservation whose sale is gone, so the order is:
//  1. the engine closes the sale if nobody has reserved in it, in one atomic step (conflict
//     otherwise): from then on no buy can succeed on the engine's copy;
//  2. the order store records it closed, so that an engine rebuilding it from there (Redis
//     keys lost meanwhile) rebuilds it closed too;
//  3. the order store deletes the row (its own guard refuses one with reservations or
//     payments);
//  4. the engine drops its closed, empty copy.
//
// If step 2 or 3 fails, the store gets its definition back and the engine its open copy (drop
// and reload: nothing was reserved, so the reloaded sale is the same sale; a sale that had
// ended already is left as it is), and the error is returned. If step 4 fails the sale is gone from the store but its closed copy is still in the
// engine; the same DELETE, sent again, finishes it (the store's not_found then counts as done).
func (s *Service) DeleteSale(ctx context.Context, saleID string) error {
	orig, _, err := s.inv.Sale(ctx, saleID)
	if err != nil {
		return err
	}
	closed, err := s.inv.CloseUnreserved(ctx, saleID)
	if err != nil {
		return err
	}
	undo := func(err error) error {
		errs := []error{err}
		if uerr := s.store.UpdateSale(ctx, orig); uerr != nil && seckill.ErrorCode(uerr) != seckill.CodeNotFound {
			errs = append(errs, fmt.Errorf("undo delete sale %s: restore its definition: %w", saleID, uerr))
		}
		if closed.EndsAt.Equal(orig.EndsAt) {
			// It had ended already: the engine's copy is as it was (a released sale of the
			// memory engine is not reloaded as a fresh one).
			return errors.Join(errs...)
		}
		if derr := s.inv.DropSale(ctx, saleID); derr != nil && seckill.ErrorCode(derr) != seckill.CodeNotFound {
			errs = append(errs, fmt.Errorf("undo delete sale %s: drop the closed copy: %w", saleID, derr))
		} else if lerr := s.inv.LoadSale(ctx, orig, 0); lerr != nil && seckill.ErrorCode(lerr) != seckill.CodeConflict {
			errs = append(errs, fmt.Errorf("undo delete sale %s: reload it: %w", saleID, lerr))
		}
		return errors.Join(errs...)
	}
	if err := s.store.UpdateSale(ctx, closed); err != nil && seckill.ErrorCode(err) != seckill.CodeNotFound {
		return undo(unavailable(err))
	}
	if err := s.store.DeleteSale(ctx, saleID); err != nil && seckill.ErrorCode(err) != seckill.CodeNotFound {
		return undo(unavailable(err))
	}
	// The purchase-path cache keys on the id; a sale made later with this id may start at
	// another time. (Other instances keep theirs until they restart: reuse a deleted sale's id
	// only once they have, or their buyers' purchase paths are refused.)
	s.starts.Delete(saleID)
	if err := s.inv.DropSale(ctx, saleID); err != nil && seckill.ErrorCode(err) != seckill.CodeNotFound {
		return err
	}
	return nil
}
