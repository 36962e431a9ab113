package redisinv

import (
	"context"

	"github.com/seckill-go/seckill"
)

var _ seckill.SaleAdmin = (*Engine)(nil)

// SetListed sets whether the storefront lists the sale (the sale hash's listed field, which a
// rebuild takes from the order store's definition like every other field).
func (e *Engine) SetListed(ctx context.Context, saleID string, listed bool) (seckill.Sale, seckill.StockState, error) {
	op := "unlist"
	if listed {
		op = "list"
	}
	r, err := e.saleAdmin(ctx, saleID, op)
	if err != nil {
		return seckill.Sale{}, seckill.StockState{}, err
	}
	if in := e.segs.in(saleID, r); in != nil && !in.collapsed.Load() {
		return e.segs.segSale(ctx, saleID, in) // listed is segment 0's; the counts are every segment's
	}
	s, st := saleOf(saleID, r)
	return s, st, nil
}

// CloseUnreserved closes the sale if nobody has reserved in it, in one script.
func (e *Engine) CloseUnreserved(ctx context.Context, saleID string) (seckill.Sale, error) {
	if seckill.ValidID(saleID) {
		if _, err := e.segs.oneSegment(ctx, saleID); err != nil {
			return seckill.Sale{}, err
		}
	}
	r, err := e.saleAdmin(ctx, saleID, "close_unreserved")
	if err != nil {
		return seckill.Sale{}, err
	}
	s, _ := saleOf(saleID, r)
	return s, nil
}

// DropSale deletes the keys of a closed sale nobody has reserved in. A call on the sale then
// finds it missing, and answers not_found once the order store has no row for it either
// (service.Service.DeleteSale deletes the row first).
func (e *Engine) DropSale(ctx context.Context, saleID string) error {
	var in *segInfo
	if seckill.ValidID(saleID) {
		var err error
		if in, err = e.segs.oneSegment(ctx, saleID); err != nil {
			return err
		}
	}
	_, err := e.saleAdmin(ctx, saleID, "drop")
	if err == nil {
		e.versions.m.Delete(saleID) // a sale made again under this id starts its versions anew
		if in != nil {
			err = e.segs.dropSegments(ctx, saleID, in)
		}
	}
	return err
}

// saleAdmin runs sale_admin.lua's op on the sale and turns its refusals into domain errors.
//
// sale_admin.lua: KEYS the sale's eight keys; ARGV [1] clock, [2] op: 'list', 'unlist',
// 'close_unreserved' (reply a sale_reply) or 'drop' (reply {'ok'}); {'conflict'} when the sale
// has reservations (or, to drop, is open); {'not_loaded'} / {'loading'}.
func (e *Engine) saleAdmin(ctx context.Context, saleID, op string) (reply, error) {
	if !seckill.ValidID(saleID) {
		return nil, seckill.Errorf(seckill.CodeNotFound, "sale %q not found", saleID)
	}
	r, err := e.exec(ctx, e.scripts.saleAdmin, saleID, op)
	if err != nil {
		return nil, err
	}
	switch r.code() {
	case "ok":
		return r, nil
	case "conflict":
		return nil, seckill.Errorf(seckill.CodeConflict, "sale %q has reservations (or is still open); it cannot be deleted (take it off the storefront instead)", saleID)
	}
	return nil, unexpected(op, r)
}
