// Command buywalk counts the rooms one Buy walks through in package redisinv (and its
// sub-packages): it reads a Delve trace of TestBuyWalk (redisinv/buywalk_test.go) on stdin and,
// for each Buy between the test's marks, counts the calls into the package, the moves from one
// file to another as a reader follows them (call and return, in each goroutine's order), and the
// distinct files and types. How to run it: docs/DECISIONS.md "The house: the Redis engine's rooms".
//
//	dlv trace --test ./redisinv --build-flags=-tags=buywalk 'seckill/redisinv[./]' -- -test.run 'TestBuyWalk$' 2>&1 |
//		go run ./redisinv/testdata/buywalk
package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

const module = "github.com/seckill-go/seckill/"

// where maps "importpath.Type.Func" (Type empty for a function) to its file, relative to the
// module, for every non-test Go file under dir.
func where(dir string) map[string]string {
	m := map[string]string{}
	fset := token.NewFileSet()
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			panic(err)
		}
		pkg := module + filepath.ToSlash(filepath.Dir(path))
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			recv := ""
			if fd.Recv != nil {
				t := fd.Recv.List[0].Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				if ix, ok := t.(*ast.IndexExpr); ok {
					t = ix.X
				}
				recv = t.(*ast.Ident).Name
			}
			m[pkg+"."+recv+"."+fd.Name.Name] = filepath.ToSlash(path)
		}
		return nil
	})
	return m
}

var (
	line    = regexp.MustCompile(`^(>>?) goroutine\((\d+)\): ((?:[\w.-]+/)+[\w-]+\.(?:\(\*?\w+\)\.)?[\w.\[\]-]+)`)
	closure = regexp.MustCompile(`(\.func\d+|\.deferwrap\d+|\.gowrap\d+|-fm)+$`)
	shape   = regexp.MustCompile(`\[[^\]]*\]`)
)

// split turns a traced name into its key in where's map and its type ("" for a function).
func split(name string) (key, typ string) {
	name = shape.ReplaceAllString(closure.ReplaceAllString(name, ""), "")
	for closure.MatchString(name) {
		name = closure.ReplaceAllString(name, "")
	}
	slash := strings.LastIndex(name, "/")
	pkg, rest, _ := strings.Cut(name[slash+1:], ".")
	pkg = name[:slash+1] + pkg
	if i := strings.LastIndex(rest, "."); i >= 0 {
		typ = strings.Trim(rest[:i], "(*)")
		rest = rest[i+1:]
	}
	return pkg + "." + typ + "." + rest, typ
}

type walk struct {
	calls       int
	transitions int
	files       map[string]bool
	types       map[string]bool
	last        map[string]string // goroutine → file of its last event
	path        map[string][]string
}

func main() {
	files := where("redisinv")
	walks := map[string]*walk{}
	var order []string
	var cur *walk
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		kind, g, name := m[1], m[2], strings.TrimSuffix(m[3], ".")
		if strings.Contains(name, "buyWalkStart") && kind == ">" {
			label := "segments=" + strings.TrimSuffix(strings.SplitN(sc.Text(), "buyWalkStart(", 2)[1], ")")
			cur = &walk{files: map[string]bool{}, types: map[string]bool{}, last: map[string]string{}, path: map[string][]string{}}
			walks[label] = cur
			order = append(order, label)
			continue
		}
		if strings.Contains(name, "buyWalkEnd") {
			cur = nil
			continue
		}
		if cur == nil || strings.Contains(name, "buyWalk") {
			continue
		}
		key, typ := split(name)
		file, ok := files[key]
		if !ok {
			continue // a test helper
		}
		if kind == ">" {
			cur.calls++
			if typ != "" {
				cur.types[typ] = true
			}
		}
		cur.files[file] = true
		if prev, ok := cur.last[g]; ok && prev != file {
			cur.transitions++
			cur.path[g] = append(cur.path[g], file)
		} else if !ok {
			cur.path[g] = append(cur.path[g], file)
		}
		cur.last[g] = file
	}
	for _, label := range order {
		w := walks[label]
		fmt.Printf("Buy, %s: %d calls, %d moves between files, %d files, %d types\n", label, w.calls, w.transitions, len(w.files), len(w.types))
		fmt.Printf("  files: %s\n  types: %s\n", keys(w.files), keys(w.types))
		var gs []string
		for g := range w.path {
			gs = append(gs, g)
		}
		sort.Strings(gs)
		for _, g := range gs {
			fmt.Printf("  goroutine %s: %s\n", g, strings.Join(w.path[g], " → "))
		}
	}
}

func keys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}
