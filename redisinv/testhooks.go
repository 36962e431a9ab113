//go:build seckill_testhooks

package redisinv

// WithoutVersionCheckForTests switches the version check off (withoutVersionCheck): a Redis
// that went back in time is served as it is. It exists only in binaries built with the
// seckill_testhooks tag, which the fault suite builds so that its negative control can run
// `seckill serve` without the check; a release build has no such option.
func WithoutVersionCheckForTests() Option { return withoutVersionCheck() }
