package service

import (
	"context"

	"github.com/seckill-go/seckill"
)

// Refunds lists up to limit refunds with the given status, oldest first (the operator's list
// of refund_failed ones). An unknown status or a limit outside 1..MaxRefundList is invalid_argument.
func (s *Service) Refunds(ctx context.Context, status seckill.RefundStatus, limit int) ([]seckill.Refund, error) {
	if !status.Valid() {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument,
			"refund status %q; want refund_required, refund_pending, refunded or refund_failed", status)
	}
	if limit < 1 || limit > seckill.MaxRefundList {
		return nil, seckill.Errorf(seckill.CodeInvalidArgument, "limit %d; want 1..%d", limit, seckill.MaxRefundList)
	}
	list, err := s.store.Refunds(ctx, status, limit)
	if err != nil {
		return nil, unavailable(err)
	}
	return list, nil
}

// RefundCounts counts refunds by status (for /metrics).
func (s *Service) RefundCounts(ctx context.Context) (seckill.RefundCounts, error) {
	c, err := s.store.RefundCounts(ctx)
	if err != nil {
		return seckill.RefundCounts{}, unavailable(err)
	}
	return c, nil
}
