package payment_test

import (
	"fmt"
	"time"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
)

// The gateway signs the raw body; the receiver verifies the same raw bytes before parsing them.
func ExampleVerifyEvent() {
	secret := []byte("whsec_example")
	body := []byte(`{"payment_id":"pay_1","reservation_id":"r_1","amount_cents":1999,"status":"succeeded"}`)
	sent := time.Unix(1700000000, 0)
	header := payment.Sign(secret, sent, body)
	fmt.Println(header)

	ev, err := payment.VerifyEvent(secret, header, body, sent.Add(30*time.Second))
	fmt.Println(ev.PaymentID, ev.AmountCents, ev.Succeeded(), err)

	_, err = payment.VerifyEvent(secret, header, body, sent.Add(6*time.Minute))
	fmt.Println(seckill.ErrorCode(err))
	// Output:
	// t=1700000000,v1=ca5969a1b272210e10ed4619621b12c841d48a22f141141bca73055b7e3d9e76
	// pay_1 1999 true <nil>
	// invalid_signature
}
