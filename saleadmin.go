package seckill

import "context"

// SaleAdmin is the part of an Inventory for listing a sale on and off the storefront and for
// deleting one nobody has reserved in (service.Service.SetListed and DeleteSale).
type SaleAdmin interface {
	// SetListed sets the sale's listed flag and returns the sale as it is now; not_found for an
	// unknown sale. Nothing else of the sale changes.
	SetListed(ctx context.Context, saleID string, listed bool) (Sale, StockState, error)
	// CloseUnreserved closes the sale now, as CloseSale does, if no reservation was ever made
	// in it (in any status) and nothing is sold; otherwise it changes nothing and answers
	// conflict. In one atomic step, so that no buy can slip in between the check and the close:
	// once it returns nil no buy of the sale can succeed.
	CloseUnreserved(ctx context.Context, saleID string) (Sale, error)
	// DropSale removes a closed sale that has no reservation and nothing sold from the engine
	// (conflict otherwise; not_found for an unknown one). Calls on it then answer not_found.
	DropSale(ctx context.Context, saleID string) error
}
