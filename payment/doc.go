// Package payment is the money edge of the flash-sale backend. Gateway is the seam every payment
// provider implements (docs/PAYMENTS.md); ForService adapts one to seckill.Payments. The package
// signs and verifies our own webhook (docs/API.md, "Payment webhook") and parses its body
// strictly, and provides two gateways: WebhookGateway, that scheme for shops with an in-house
// payment service, and MockGateway, an in-process stand-in for a third-party gateway.
//
// It exists as its own package because the webhook is the one request that can turn a hold into
// a paid order, so its checks (an HMAC over the raw body, a replay window, a strict body parser)
// must be written once, tested hard (including fuzzing) and shared by the HTTP handler, the demo
// and the load tool. The mock exists so that `seckill serve --dev`, `seckill demo` and the tests
// exercise the same asynchronous, retrying, sometimes duplicated delivery a real gateway makes,
// without a network dependency.
//
// The package imports only the standard library and the root package, so any adapter may use it.
package payment
