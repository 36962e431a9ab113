// Package stripegw is the Stripe implementation of payment.Gateway, with the official
// stripe-go client: a Checkout Session per held reservation (the buyer pays on Stripe's
// hosted page), notifications verified with stripe-go's webhook helpers, sessions expired
// when their hold ends, and refunds paid back against the session's PaymentIntent.
//
// Every call that changes something at Stripe carries an idempotency key derived from the
// reservation or the payment (the session id), so a retry from any instance, after a timeout
// or a crash, never creates a second session, expires twice or refunds twice.
package stripegw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v85"

	"github.com/seckill-go/seckill"
	"github.com/seckill-go/seckill/payment"
)

// Name is the gateway's name in configuration and in its webhook route,
// /api/v1/payments/webhook/stripe.
const Name = "stripe"

// Stripe's bounds on a Checkout Session's expires_at: at least 30 minutes and at most 24 hours
// after the session is created.
const (
	minSessionLife = 30 * time.Minute
	maxSessionLife = 24 * time.Hour
	// sessionSlack is added to the minimum so that a clock of ours a little behind Stripe's, or
	// a slow request, does not make Stripe refuse expires_at as too early.
	sessionSlack = time.Minute
)

// MetadataKey is the metadata key that marks a Checkout Session as seckill's: every session
// Start creates carries metadata[seckill] = the group (Config.Group). Stripe sends every
// checkout.session.* event of the account to the endpoint; one whose session lacks the mark
// (the shop's own checkout, a Payment Link) or names another group is ignored, told apart by
// the event alone, without a database look-up.
const MetadataKey = "seckill"

// DefaultGroup is Config.Group when none is set.
const DefaultGroup = "seckill"

// Config configures a Gateway.
type Config struct {
	// SecretKey is the Stripe API secret key (SECKILL_STRIPE_SECRET_KEY). Required.
	SecretKey string
	// WebhookSecret is the signing secret of the webhook endpoint ("whsec_…",
	// SECKILL_STRIPE_WEBHOOK_SECRET). Required: without it no notification can be verified.
	WebhookSecret string
	// APIURL is the base URL of the Stripe API (SECKILL_STRIPE_API_URL). Default: Stripe's own,
	// https://api.stripe.com; tests point it at stripe-mock.
	APIURL string
	// SuccessURL is the absolute URL of the storefront Stripe's hosted page sends the buyer back
	// to after paying ("https://shop.example/"); the buyer lands on the sale's page there, the
	// storefront's route #/sale/<id> (SalePage). Required: Stripe needs one, and only the shop
	// knows its own address.
	SuccessURL string
	// CancelURL is the storefront the buyer goes back to when leaving the hosted page unpaid,
	// also at the sale's page. Default: SuccessURL.
	CancelURL string
	// ProductName names the line item on the hosted page when the sale has no name. Default:
	// "Reservation <id>". A named sale's line item is its name.
	ProductName string
	// Logger receives stripe-go's own warnings and errors (never a key or a secret).
	// Default: discard.
	Logger *slog.Logger
	// HTTPClient makes the API calls. Default: stripe-go's (80 s timeout).
	HTTPClient *http.Client
	// Tolerance is how far a notification's signed timestamp may be from now, either way.
	// Default: stripe-go's DefaultTolerance, 300 s.
	Tolerance time.Duration
	// Group names the seckill deployment in the metadata of the sessions it creates
	// (metadata[MetadataKey]); events of sessions without it are ignored (SECKILL_STRIPE_GROUP).
	// Every instance of one deployment must share it; two deployments on one Stripe account
	// (staging and production) must not. 1–64 of [A-Za-z0-9_.-] (seckill.ValidID). Default:
	// DefaultGroup.
	Group string
}

// Gateway is the Stripe payment.Gateway. It is safe for concurrent use.
type Gateway struct {
	client        *stripe.Client
	webhookSecret string
	successURL    string
	cancelURL     string
	productName   string
	tolerance     time.Duration
	group         string
	logger        *slog.Logger
	redact        *strings.Replacer // takes the key and the webhook secret out of text that is logged or returned
}

var _ payment.Gateway = (*Gateway)(nil)

// New checks the configuration and returns a Gateway. It makes no call to Stripe.
func New(cfg Config) (*Gateway, error) {
	if cfg.SecretKey == "" {
		return nil, errors.New("stripegw: the Stripe secret key is required")
	}
	if cfg.WebhookSecret == "" {
		return nil, errors.New("stripegw: the Stripe webhook signing secret is required")
	}
	if err := absoluteURL("SuccessURL", cfg.SuccessURL); err != nil {
		return nil, err
	}
	if cfg.CancelURL == "" {
		cfg.CancelURL = cfg.SuccessURL
	}
	if err := absoluteURL("CancelURL", cfg.CancelURL); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = stripe.WebhookDefaultTolerance
	}
	if cfg.Group == "" {
		cfg.Group = DefaultGroup
	}
	if !seckill.ValidID(cfg.Group) {
		return nil, fmt.Errorf("stripegw: Group must be 1 to %d of [A-Za-z0-9_.-], got %q", seckill.MaxIDBytes, cfg.Group)
	}
	bc := &stripe.BackendConfig{
		HTTPClient:    cfg.HTTPClient,
		LeveledLogger: leveledLogger{l: cfg.Logger, secrets: redactor(cfg.SecretKey, cfg.WebhookSecret)},
	}
	if cfg.APIURL != "" {
		if err := absoluteURL("APIURL", cfg.APIURL); err != nil {
			return nil, err
		}
		bc.URL = stripe.String(cfg.APIURL)
	}
	client := stripe.NewClient(cfg.SecretKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc)))
	return &Gateway{
		client:        client,
		webhookSecret: cfg.WebhookSecret,
		successURL:    cfg.SuccessURL,
		cancelURL:     cfg.CancelURL,
		productName:   cfg.ProductName,
		tolerance:     cfg.Tolerance,
		group:         cfg.Group,
		logger:        cfg.Logger,
		redact:        redactor(cfg.SecretKey, cfg.WebhookSecret),
	}, nil
}

func absoluteURL(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("stripegw: %s must be an absolute http(s) URL, got %q", field, raw)
	}
	return nil
}

// Name implements payment.Gateway.
func (g *Gateway) Name() string { return Name }

// Start creates a Checkout Session for the held reservation and returns its id and hosted page.
// The idempotency key is the request's (the reservation id): starting twice returns the same
// session, which is why every parameter, expires_at included, is a function of the request
// alone (Stripe refuses a key reused with other parameters).
func (g *Gateway) Start(ctx context.Context, req payment.StartRequest) (seckill.PaymentIntent, error) {
	if req.ReservationID == "" || req.AmountCents <= 0 || req.ExpiresAt.IsZero() {
		return seckill.PaymentIntent{}, seckill.Errorf(seckill.CodeInvalidArgument,
			"a Stripe payment needs a reservation id, a positive amount and an expiry")
	}
	currency := req.Currency
	if currency == "" {
		currency = payment.DefaultCurrency
	}
	key := req.IdempotencyKey
	if key == "" {
		key = req.ReservationID
	}
	params := &stripe.CheckoutSessionCreateParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		ClientReferenceID: stripe.String(req.ReservationID),
		ExpiresAt:         stripe.Int64(SessionExpiry(req.HeldAt, req.ExpiresAt).Unix()),
		SuccessURL:        stripe.String(SalePage(g.successURL, req.SaleID)),
		CancelURL:         stripe.String(SalePage(g.cancelURL, req.SaleID)),
		Metadata:          map[string]string{MetadataKey: g.group, "reservation_id": req.ReservationID, "user_id": req.UserID},
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:    stripe.String(currency),
				UnitAmount:  stripe.Int64(req.AmountCents),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripe.String(g.lineItemName(req))},
			},
		}},
	}
	params.SetIdempotencyKey(key)
	s, err := g.client.V1CheckoutSessions.Create(ctx, params)
	if err != nil {
		return seckill.PaymentIntent{}, g.apiError("create checkout session", err)
	}
	return seckill.PaymentIntent{PaymentID: s.ID, RedirectURL: s.URL}, nil
}

// SessionExpiry is the expires_at of a Checkout Session for a hold that began at heldAt and
// ends at holdEnd: 31 minutes after the hold ends (Stripe's 30-minute minimum from creation
// plus a minute of slack), capped at 24 hours less that minute after the hold began (Stripe's
// 24-hour maximum from creation, which is later). It depends on the hold alone, never on the
// time of the call, so that a retried Start sends the same parameters under the same
// idempotency key, however long the hold. A hold of unknown start (zero heldAt) is taken to
// begin at its end: no cap, which is right for every hold up to 23 h 28 min.
//
// Only a hold longer than that reaches the cap; its session then expires before the hold, and
// a Start made later than 23 h 29 min into the hold cannot create one (Stripe refuses an
// expires_at less than 30 minutes away): such a hold cannot be paid through Stripe by then.
// The session outliving its hold is harmless: ClosePayment expires it when the hold ends, and a
// payment that slips in before that follows the late rule.
func SessionExpiry(heldAt, holdEnd time.Time) time.Time {
	if heldAt.IsZero() {
		heldAt = holdEnd
	}
	at := holdEnd.Add(minSessionLife + sessionSlack)
	if limit := heldAt.Add(maxSessionLife - sessionSlack); at.After(limit) {
		at = limit
	}
	return at
}

// SalePage is the storefront's page of a sale, where the hosted page sends the buyer back:
// storefront with the fragment #/sale/<saleID> (the storefront's route, httpapi/web/app.js),
// replacing any fragment it had. Sale ids are [A-Za-z0-9_.-], nothing to escape. Without a
// sale id it is the storefront itself.
func SalePage(storefront, saleID string) string {
	u, err := url.Parse(storefront)
	if err != nil || saleID == "" {
		return storefront // New checked it parses
	}
	u.Fragment, u.RawFragment = "/sale/"+saleID, ""
	return u.String()
}

// lineItemName is what the hosted page says is paid for: the sale's name, else the configured
// ProductName, else the reservation.
func (g *Gateway) lineItemName(req payment.StartRequest) string {
	if name := strings.TrimSpace(req.SaleName); name != "" {
		return name
	}
	if g.productName != "" {
		return g.productName
	}
	return "Reservation " + req.ReservationID
}

// ClosePayment expires the session so that it can no longer be paid. Whatever Expire answers (an
// expired or completed session refuses to expire again; a reply may be lost), the session is
// read back and its status decides: expired is done, complete is ErrAlreadyPaid, open is the
// error to retry. A session ClosePayment never manages to expire still expires by itself at its
// expires_at, at most 31 minutes after its hold.
func (g *Gateway) ClosePayment(ctx context.Context, paymentID string) error {
	if paymentID == "" {
		return seckill.Errorf(seckill.CodeInvalidArgument, "no payment id to close")
	}
	params := &stripe.CheckoutSessionExpireParams{}
	params.SetIdempotencyKey("close-" + paymentID)
	s, expireErr := g.client.V1CheckoutSessions.Expire(ctx, paymentID, params)
	if expireErr == nil && s.Status == stripe.CheckoutSessionStatusExpired {
		return nil
	}
	s, err := g.client.V1CheckoutSessions.Retrieve(ctx, paymentID, nil)
	if err != nil {
		if isNotFound(err) {
			return nil // Stripe has no such session: nothing can be paid through it
		}
		return g.apiError("read checkout session", err)
	}
	switch s.Status {
	case stripe.CheckoutSessionStatusExpired:
		return nil
	case stripe.CheckoutSessionStatusComplete:
		return payment.ErrAlreadyPaid
	}
	if expireErr != nil {
		return g.apiError("expire checkout session", expireErr)
	}
	return fmt.Errorf("stripegw: checkout session %s is still %q after expiring it", paymentID, s.Status)
}

// State reads the session: open (or complete with an asynchronous payment still pending) is
// StateOpen, complete and paid is StateSucceeded (StateRefunded once its charge is refunded in
// full), expired is StateClosed, and a session Stripe does not know is StateUnknown.
func (g *Gateway) State(ctx context.Context, paymentID string) (payment.State, error) {
	params := &stripe.CheckoutSessionRetrieveParams{}
	params.AddExpand("payment_intent.latest_charge")
	s, err := g.client.V1CheckoutSessions.Retrieve(ctx, paymentID, params)
	if err != nil {
		if isNotFound(err) {
			return payment.StateUnknown, nil
		}
		return "", g.apiError("read checkout session", err)
	}
	return sessionState(s), nil
}

func sessionState(s *stripe.CheckoutSession) payment.State {
	switch s.Status {
	case stripe.CheckoutSessionStatusExpired:
		return payment.StateClosed
	case stripe.CheckoutSessionStatusComplete:
		if s.PaymentStatus == stripe.CheckoutSessionPaymentStatusUnpaid {
			return payment.StateOpen // an asynchronous payment (a bank debit) is on its way
		}
		if pi := s.PaymentIntent; pi != nil && pi.LatestCharge != nil && pi.LatestCharge.Refunded {
			return payment.StateRefunded
		}
		return payment.StateSucceeded
	case stripe.CheckoutSessionStatusOpen:
		return payment.StateOpen
	}
	return payment.StateUnknown
}

// Refund pays the session's payment back: it finds the session's PaymentIntent and creates a
// Refund of req.AmountCents against it, with the idempotency key "refund-"+payment id, so that
// a retry from any instance returns the first refund instead of sending a second one. Beyond
// the 24 hours Stripe keeps a key, a second full refund is still refused by Stripe (the charge
// is refunded already), which Refund reports as succeeded.
func (g *Gateway) Refund(ctx context.Context, req payment.RefundRequest) (payment.RefundResult, error) {
	if req.PaymentID == "" || req.AmountCents <= 0 {
		return payment.RefundResult{}, seckill.Errorf(seckill.CodeInvalidArgument, "a refund needs a payment id and a positive amount")
	}
	s, err := g.client.V1CheckoutSessions.Retrieve(ctx, req.PaymentID, nil)
	if err != nil {
		if isNotFound(err) {
			g.logger.Warn("stripe refund: no such checkout session", "payment_id", req.PaymentID)
			return payment.RefundResult{Status: payment.RefundFailed}, nil
		}
		return payment.RefundResult{}, g.apiError("read checkout session", err)
	}
	if s.PaymentIntent == nil || s.PaymentIntent.ID == "" {
		if s.Status == stripe.CheckoutSessionStatusComplete {
			return payment.RefundResult{}, fmt.Errorf("stripegw: checkout session %s is complete but has no payment intent yet", req.PaymentID)
		}
		g.logger.Warn("stripe refund: the checkout session was never paid", "payment_id", req.PaymentID, "status", string(s.Status))
		return payment.RefundResult{Status: payment.RefundFailed}, nil
	}
	params := &stripe.RefundCreateParams{
		PaymentIntent: stripe.String(s.PaymentIntent.ID),
		Amount:        stripe.Int64(req.AmountCents),
	}
	params.SetIdempotencyKey("refund-" + req.PaymentID)
	r, err := g.client.V1Refunds.Create(ctx, params)
	if err != nil {
		var se *stripe.Error
		if errors.As(err, &se) && se.Code == stripe.ErrorCodeChargeAlreadyRefunded {
			return payment.RefundResult{Status: payment.RefundSucceeded}, nil
		}
		if permanent(err) {
			g.logger.Warn("stripe refund refused", "payment_id", req.PaymentID, "error", err.Error())
			return payment.RefundResult{Status: payment.RefundFailed}, nil
		}
		return payment.RefundResult{}, g.apiError("create refund", err)
	}
	return payment.RefundResult{RefundID: r.ID, Status: refundStatus(r.Status)}, nil
}

func refundStatus(s stripe.RefundStatus) payment.RefundStatus {
	switch s {
	case stripe.RefundStatusSucceeded:
		return payment.RefundSucceeded
	case stripe.RefundStatusFailed, stripe.RefundStatusCanceled:
		return payment.RefundFailed
	}
	return payment.RefundPending // pending, requires_action, or a status newer than this code
}

// isNotFound reports whether Stripe answered 404 (resource_missing).
func isNotFound(err error) bool {
	var se *stripe.Error
	return errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound
}

// permanent reports whether Stripe refused the request itself (a 4xx other than a rate limit,
// a conflict or an idempotency clash): retrying the same request cannot succeed.
func permanent(err error) bool {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.HTTPStatusCode {
	case http.StatusBadRequest, http.StatusPaymentRequired, http.StatusNotFound:
		return se.Type != stripe.ErrorTypeIdempotency
	}
	return false
}

// apiError wraps a Stripe error as unavailable (a provider failure, to be retried), keeping
// Stripe's message with the secrets taken out: Stripe masks a wrong key in its answer, but a
// stand-in such as stripe-mock echoes the whole Authorization header.
func (g *Gateway) apiError(op string, err error) error {
	var se *stripe.Error
	if errors.As(err, &se) {
		coded := seckill.Errorf(seckill.CodeUnavailable, "stripe: %s: %s (HTTP %d, %s)", op, g.redact.Replace(se.Msg), se.HTTPStatusCode, se.Code)
		if se.HTTPStatusCode == http.StatusTooManyRequests { // the account's rate limit: payment.WithBackoff
			var after string
			if se.LastResponse != nil {
				after = se.LastResponse.Header.Get("Retry-After")
			}
			return &payment.RateLimitedError{RetryAfter: payment.ParseRetryAfter(after, time.Now()), Err: coded}
		}
		return coded
	}
	return seckill.Errorf(seckill.CodeUnavailable, "stripe: %s: %s", op, g.redact.Replace(err.Error()))
}

// redactor replaces each non-empty secret with a placeholder.
func redactor(secrets ...string) *strings.Replacer {
	var pairs []string
	for _, s := range secrets {
		if s != "" {
			pairs = append(pairs, s, "[redacted]")
		}
	}
	return strings.NewReplacer(pairs...)
}

// leveledLogger routes stripe-go's log lines to slog: its errors and warnings as warnings, the
// rest at debug level.
type leveledLogger struct {
	l       *slog.Logger
	secrets *strings.Replacer // stripe-go logs the error bodies it gets, which may echo the key
}

func (l leveledLogger) Debugf(format string, v ...any) {
	l.l.Debug("stripe: " + l.secrets.Replace(fmt.Sprintf(format, v...)))
}
func (l leveledLogger) Infof(format string, v ...any) {
	l.l.Debug("stripe: " + l.secrets.Replace(fmt.Sprintf(format, v...)))
}
func (l leveledLogger) Warnf(format string, v ...any) {
	l.l.Warn("stripe: " + l.secrets.Replace(fmt.Sprintf(format, v...)))
}
func (l leveledLogger) Errorf(format string, v ...any) {
	l.l.Warn("stripe: " + l.secrets.Replace(fmt.Sprintf(format, v...)))
}
