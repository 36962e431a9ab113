package httpapi

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// openAPIMethods are the operation keys of an OpenAPI path item.
var openAPIMethods = map[string]bool{
	"get": true, "put": true, "post": true, "delete": true, "options": true, "head": true, "patch": true, "trace": true,
}

// TestOpenAPIMatchesRoutes keeps the routing table and the embedded OpenAPI document in step:
// every route (method + pattern) is an operation of the document, and every operation of the
// document is a route. Both write path parameters as {name}, so patterns compare as strings;
// Go-only pattern syntax ({name...}, {$}) would make the comparison meaningless and is refused.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	s := New(Config{})
	raw, err := assets.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}

	param := regexp.MustCompile(`\{[^}]*\}`)
	routes := map[string]bool{}
	for _, rt := range s.routes() {
		key := strings.ToUpper(rt.method) + " " + rt.pattern
		if routes[key] {
			t.Errorf("route %s is registered twice", key)
		}
		routes[key] = true
		for _, p := range param.FindAllString(rt.pattern, -1) {
			if !regexp.MustCompile(`^\{[a-z_]+\}$`).MatchString(p) {
				t.Errorf("route %s: parameter %s is not plain {name} syntax", key, p)
			}
		}
		if !strings.HasPrefix(rt.pattern, "/") || strings.ContainsAny(rt.pattern, " \t") {
			t.Errorf("route %s: pattern must be a bare path", key)
		}
	}

	ops := map[string]bool{}
	for path, item := range doc.Paths {
		for m, op := range item {
			if !openAPIMethods[m] {
				continue // parameters, summary, …
			}
			key := strings.ToUpper(m) + " " + path
			ops[key] = true
			var o struct {
				Parameters []openAPIParam             `json:"parameters"`
				Responses  map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(op, &o); err != nil || len(o.Responses) == 0 {
				t.Errorf("operation %s has no responses (%v)", key, err)
			}
			var common []openAPIParam
			if raw, ok := item["parameters"]; ok {
				if err := json.Unmarshal(raw, &common); err != nil {
					t.Errorf("path %s: parameters: %v", path, err)
				}
			}
			// The path parameters declared must be exactly those of the template.
			declared := map[string]bool{}
			for _, p := range append(common, o.Parameters...) {
				if p.In == "path" {
					declared[p.Name] = true
					if !p.Required {
						t.Errorf("operation %s: path parameter %s must be required", key, p.Name)
					}
				}
			}
			inPath := map[string]bool{}
			for _, p := range param.FindAllString(path, -1) {
				inPath[p[1:len(p)-1]] = true
			}
			for n := range inPath {
				if !declared[n] {
					t.Errorf("operation %s does not declare path parameter %s", key, n)
				}
			}
			for n := range declared {
				if !inPath[n] {
					t.Errorf("operation %s declares path parameter %s that its path lacks", key, n)
				}
			}
		}
	}

	for _, k := range sorted(routes) {
		if !ops[k] {
			t.Errorf("route %s is not in openapi.json", k)
		}
	}
	for _, k := range sorted(ops) {
		if !routes[k] {
			t.Errorf("openapi.json documents %s, which has no route", k)
		}
	}
}

type openAPIParam struct {
	Name     string `json:"name"`
	In       string `json:"in"`
	Required bool   `json:"required"`
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
