package redisinv

import (
	"embed"
	"strings"

	"github.com/redis/rueidis"
)

// The Lua scripts live one per operation in lua/, each with a header listing its KEYS, ARGV
// and replies. prelude.lua (validators and encoders) and common.lua (the state, the helpers,
// the queue and reclaim rules) are spliced into each script at its "-- @common" line, so every
// script is one self-contained text that Redis runs atomically.
//
//go:embed lua/*.lua
var luaFS embed.FS

// scriptSet is every script of the engine. Engines share defaultScripts; tests build sets from
// mutated sources to show that the conformance suite catches a broken script.
type scriptSet struct {
	buy, reservation, sale, cancel, pay, addStock, close, reclaim, load, restore, ready, trim *script
	saleAdmin, segment, cool                                                                  *script
}

// Scripts are sent with EVALSHA, and with EVAL (which also caches them on the server) when a
// server answers NOSCRIPT: after a restart, a failover, or on a Cluster node that has not seen
// them yet. rueidis.Lua does both.
var defaultScripts = newScriptSet(scriptSource)

// newScriptSet builds every script from source(name).
func newScriptSet(source func(name string) string) *scriptSet {
	load := func(name string) *script {
		src := source(name + ".lua")
		return &script{name: name, src: src, lua: rueidis.NewLuaScript(src), read: name == "reservation" || name == "sale"}
	}
	return &scriptSet{
		buy: load("buy"), reservation: load("reservation"), sale: load("sale"), cancel: load("cancel"),
		pay: load("pay"), addStock: load("add_stock"), close: load("close"), reclaim: load("reclaim"),
		load: load("load"), restore: load("restore"), ready: load("ready"), trim: load("trim"),
		saleAdmin: load("sale_admin"), segment: load("segment"), cool: load("cool"),
	}
}

// script is one Lua script of this package.
type script struct {
	name string
	src  string
	lua  *rueidis.Lua
	read bool // changes nothing worth waiting for replicas for (call.go run)
	room bool // a waiting room's script (room.go): the room's keys; changes nothing of the sale
}

// scriptSource returns the full text of lua/name with prelude.lua and common.lua spliced in (or,
// for a room script marked "-- @room", prelude.lua and room_common.lua).
func scriptSource(name string) string {
	read := func(file string) string {
		b, err := luaFS.ReadFile("lua/" + file)
		if err != nil {
			panic("redisinv: missing embedded lua/" + file + ": " + err.Error())
		}
		return string(b)
	}
	prelude, body := read("prelude.lua"), read(name)
	const marker, roomMarker = "\n-- @common\n", "\n-- @room\n"
	if strings.Count(body, roomMarker) == 1 && !strings.Contains(body, marker) {
		// A waiting room's script (room.go): room_common.lua in place of common.lua.
		return strings.Replace(body, roomMarker, "\n"+prelude+"\n"+read("room_common.lua")+"\n", 1)
	}
	common := read("common.lua")
	if strings.Count(body, marker) != 1 {
		panic("redisinv: lua/" + name + " must have exactly one \"-- @common\" line")
	}
	return strings.Replace(body, marker, "\n"+prelude+"\n"+common+"\n", 1)
}
