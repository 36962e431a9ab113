package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/client"
	"github.com/seckill-go/seckill/payment"
)

// A buyer's rush: fetch the purchase path once the sale has started, buy with an idempotency
// key (safe to retry), pay, and wait for the gateway's notification to make the hold paid.
func Example() {
	ctx := context.Background()
	admin := client.New(serverURL, client.WithToken(adminToken))
	if _, err := admin.CreateSale(ctx, client.NewSale{ID: "rush-phone", Name: "Phone", PriceCents: 99900, Stock: 1, QueueLimit: client.Ptr(0)}); err != nil {
		log.Fatal(err)
	}

	anon := client.New(serverURL, client.WithRetries(3, 5*time.Second))
	token, err := anon.DevToken(ctx, "alice") // a --dev server's; a shop's sign-in gives real ones
	if err != nil {
		log.Fatal(err)
	}
	alice := anon.WithToken(token)
	path, err := alice.Path(ctx, "rush-phone")
	if err != nil {
		log.Fatal(err)
	}
	hold, err := alice.Buy(ctx, path.Path, 1, "alice-phone-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("bought:", hold.Status, hold.AmountCents)

	// The last unit is alice's: the next buyer hears why not as a code.
	bobToken, _ := anon.DevToken(ctx, "bob")
	bob := anon.WithToken(bobToken)
	bobPath, _ := bob.Path(ctx, "rush-phone")
	if _, err := bob.Buy(ctx, bobPath.Path, 1, ""); client.CodeOf(err) == seckill.CodeQueueFull || client.CodeOf(err) == seckill.CodeSoldOut {
		var e *client.Error
		errors.As(err, &e)
		fmt.Println("bob:", e.Status, e.Code)
	}

	if _, err := alice.Pay(ctx, hold.ID); err != nil { // the mock gateway settles it and notifies
		log.Fatal(err)
	}
	for {
		r, err := alice.Reservation(ctx, hold.ID)
		if err != nil {
			log.Fatal(err)
		}
		if r.Status != seckill.StatusHeld {
			fmt.Println("then:", r.Status)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Output:
	// bought: held 99900
	// bob: 409 queue_full
	// then: paid
}

// An admin creating a sale: off the storefront's list until it is ready, then listed.
func ExampleClient_CreateSale() {
	ctx := context.Background()
	admin := client.New(serverURL, client.WithToken(adminToken))
	start := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	sale, err := admin.CreateSale(ctx, client.NewSale{
		ID: "admin-tv", Name: "TV", PriceCents: 49900, Stock: 100, Holdback: 10,
		StartsAt: start, EndsAt: start.Add(2 * time.Hour), PerUserLimit: 2,
		QueueLimit: client.Ptr(0), Listed: client.Ptr(false),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sale.ID, sale.Status, sale.StockState.Sellable, sale.Listed)
	if _, err := admin.AddStock(ctx, "admin-tv", 20); err != nil {
		log.Fatal(err)
	}
	if sale, err = admin.SetListed(ctx, "admin-tv", true); err != nil {
		log.Fatal(err)
	}
	fmt.Println(sale.Stock, sale.Listed)

	_, err = admin.CreateSale(ctx, client.NewSale{ID: "admin-tv", PriceCents: 1, Stock: 1})
	fmt.Println("again:", client.CodeOf(err))
	// Output:
	// admin-tv upcoming 90 false
	// 120 true
	// again: conflict
}

// Reading a buyer's orders, and the refunds an operator must settle by hand: a payment the
// server could not honour (here, of the wrong amount) is owed back.
func ExampleClient_Orders() {
	ctx := context.Background()
	admin := client.New(serverURL, client.WithToken(adminToken))
	carol, hold := holdOne(ctx, client.NewSale{ID: "orders-lamp", PriceCents: 2500, Stock: 5}, "carol") // as in Example
	// The shop's payment service reports 1 cent less than the hold's amount.
	result, err := admin.Webhook(ctx, []byte(paymentSecret), payment.Event{
		PaymentID: "pay-orders-lamp", ReservationID: hold.ID, AmountCents: hold.AmountCents - 1, Status: payment.StatusSucceeded})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("payment:", result)
	orders, err := carol.Orders(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range orders {
		fmt.Println("order:", o.PaymentID, o.Status, o.AmountCents)
	}
	refunds, err := admin.Refunds(ctx, seckill.RefundRequired, 10) // not tried yet: no refunder runs here
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range refunds {
		if r.SaleID == "orders-lamp" {
			fmt.Println("refund owed:", r.PaymentID, r.Gateway)
		}
	}
	// Output:
	// payment: refund_required
	// order: pay-orders-lamp refund_required 2499
	// refund owed: pay-orders-lamp webhook
}

// Following a sale's live events: the sale on connect and on every change of its stock, and
// the caller's own reservation.
func ExampleClient_Events() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := client.New(serverURL, client.WithToken(adminToken))
	if _, err := admin.CreateSale(ctx, client.NewSale{ID: "live-watch", PriceCents: 100, Stock: 3}); err != nil {
		log.Fatal(err)
	}
	token, _ := admin.DevToken(ctx, "dave")
	dave := admin.WithToken(token)
	path, _ := dave.Path(ctx, "live-watch")
	hold, err := dave.Buy(ctx, path.Path, 1, "")
	if err != nil {
		log.Fatal(err)
	}
	cancelled, released := false, false
	for ev, err := range dave.Events(ctx, "live-watch", hold.ID) {
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Type {
		case client.EventSale:
			fmt.Println("sale:", ev.Sale.StockState.Available, "available,", ev.Sale.StockState.Held, "held")
			released = ev.Sale.StockState.Held == 0
		case client.EventReservation:
			fmt.Println("reservation:", ev.Reservation.Status)
			if ev.Reservation.Status == seckill.StatusHeld {
				if _, err := dave.Cancel(ctx, hold.ID); err != nil {
					log.Fatal(err)
				}
			}
			cancelled = ev.Reservation.Status == seckill.StatusCancelled
		}
		if cancelled && released {
			break
		}
	}
	// Unordered output:
	// sale: 2 available, 1 held
	// reservation: held
	// reservation: cancelled
	// sale: 3 available, 0 held
}

// Posting a signed webhook of the built-in scheme, as a shop's payment service does once the
// buyer has paid: the server answers what it did with the payment, and a second delivery of
// the same payment is a harmless duplicate.
func ExampleClient_Webhook() {
	ctx := context.Background()
	_, hold := holdOne(ctx, client.NewSale{ID: "hook-bike", PriceCents: 30000, Stock: 1}, "erin") // as in Example

	gateway := client.New(serverURL, client.WithRetries(5, 10*time.Second)) // retries 503s, signing anew
	ev := payment.Event{PaymentID: "pay-hook-bike", ReservationID: hold.ID, AmountCents: hold.AmountCents, Status: payment.StatusSucceeded}
	for range 2 {
		result, err := gateway.Webhook(ctx, []byte(paymentSecret), ev)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(result)
	}
	_, err := gateway.Webhook(ctx, []byte("not the secret"), ev)
	fmt.Println(client.CodeOf(err))
	// Output:
	// applied
	// duplicate
	// invalid_signature
}
