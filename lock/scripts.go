package lock

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"strings"
)

// The Lua scripts live one per file in lua/, each with a header listing KEYS, ARGV and what it
// returns. common.lua holds the helpers they share; it is spliced into each script at its
// "-- @common" line. Above that line a script may have a fast path (acquire and release do)
// that returns before the helpers are created: Redis runs the whole script text on every
// call, and defining the helpers is a measurable share of an uncontended lock+unlock pair.
//
//go:embed lua/*.lua
var luaFS embed.FS

var (
	scriptAcquire    = loadScript("acquire.lua")
	scriptRelease    = loadScript("release.lua")
	scriptReleaseAll = loadScript("release_all.lua")
	scriptCancel     = loadScript("cancel.lua")
	scriptRenew      = loadScript("renew.lua")
	scriptFence      = loadScript("fence.lua")
)

// Script is one Lua script of this package, for Redis.Eval.
type Script struct {
	src string
	sha string // hex SHA-1 of src, as EVALSHA wants it
}

// Source returns the script's Lua text, for EVAL.
func (s *Script) Source() string { return s.src }

// SHA1 returns the hex SHA-1 of the script's text, for EVALSHA.
func (s *Script) SHA1() string { return s.sha }

func loadScript(name string) *Script {
	common, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		panic("lock: missing embedded lua/common.lua: " + err.Error())
	}
	body, err := luaFS.ReadFile("lua/" + name)
	if err != nil {
		panic("lock: missing embedded lua/" + name + ": " + err.Error())
	}
	const marker = "\n-- @common\n"
	if strings.Count(string(body), marker) != 1 {
		panic("lock: lua/" + name + " must have exactly one \"-- @common\" line")
	}
	src := strings.Replace(string(body), marker, "\n"+string(common)+"\n", 1)
	sum := sha1.Sum([]byte(src))
	return &Script{src: src, sha: hex.EncodeToString(sum[:])}
}
