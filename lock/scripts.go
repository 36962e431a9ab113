package lock

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts live one per file in lua/, each with a header listing KEYS, ARGV and what it
// returns. common.lua holds the helpers they share and is prepended to each of them.
//
//go:embed lua/*.lua
var luaFS embed.FS

var (
	scriptAcquire = loadScript("acquire.lua")
	scriptRelease = loadScript("release.lua")
	scriptCancel  = loadScript("cancel.lua")
	scriptRenew   = loadScript("renew.lua")
	scriptFence   = loadScript("fence.lua")
)

func loadScript(name string) *redis.Script {
	common, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		panic("lock: missing embedded lua/common.lua: " + err.Error())
	}
	body, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic("lock: missing embedded lua/" + name + ": " + err.Error())
	}
	return redis.NewScript(string(common) + "\n" + string(body))
}
