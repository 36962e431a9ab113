package redisinv

import (
	"crypto/sha1"
	"encoding/hex"
)

// BuyCommand returns the parts of the EVALSHA of buy.lua for one buyer, the script's plain
// form: its SHA-1, the sale's keys and the arguments (clock from Redis TIME, no idempotency
// key, random half given). It exists so that the same script can be driven by another client,
// such as redis-benchmark, to compare against the engine (which sends it for up to 64 buyers
// at once); Buy itself is the way to buy. The script must be on the server already (any Buy
// loads it).
func (e *Engine) BuyCommand(saleID, user string, quantity int, random string) (sha string, keys, args []string) {
	sum := sha1.Sum([]byte(e.scripts.buy.src))
	return hex.EncodeToString(sum[:]), e.keys(saleID), []string{"", user, itoa(quantity), "", random}
}
