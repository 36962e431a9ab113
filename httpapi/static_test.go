package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

// TestStaticSite: pages reference assets by content hash and are revalidated; an asset asked
// for by its current hash is immutable, otherwise cacheable briefly; ETags give 304s; pages
// are not served as assets; unknown names are problem+json 404s.
func TestStaticSite(t *testing.T) {
	site, err := loadStatic(fstest.MapFS{
		"index.html": {Data: []byte(`<script src="/assets/app.js"></script><link href="/assets/app.json"><img src="/assets/none.png">`)},
		"app.js":     {Data: []byte(`console.log(1)`)},
		"app.json":   {Data: []byte(`{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	js, jsonAsset := site.files["app.js"], site.files["app.json"]
	page := string(site.files["index.html"].body)
	for _, want := range []string{`"/assets/app.js?v=` + js.hash + `"`, `"/assets/app.json?v=` + jsonAsset.hash + `"`, `"/assets/none.png"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page %s does not contain %s", page, want)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", site.page("index.html"))
	mux.Handle("GET /assets/{name}", site.asset(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", 404) }))
	get := func(path, inm string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if inm != "" {
			r.Header.Set("If-None-Match", inm)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	for _, c := range []struct {
		path, inm, cache, ctype string
		status                  int
	}{
		{"/", "", "no-cache", "text/html; charset=utf-8", 200},
		{"/", site.files["index.html"].etag, "no-cache", "", 304},
		{"/assets/app.js?v=" + js.hash, "", "public, max-age=31536000, immutable", "text/javascript; charset=utf-8", 200},
		{"/assets/app.js?v=old", "", "public, max-age=60", "text/javascript; charset=utf-8", 200},
		{"/assets/app.js", js.etag, "public, max-age=60", "", 304},
		{"/assets/app.js", `"other"`, "public, max-age=60", "text/javascript; charset=utf-8", 200},
		{"/assets/index.html", "", "", "", 404},
		{"/assets/missing.js", "", "", "", 404},
	} {
		w := get(c.path, c.inm)
		if w.Code != c.status {
			t.Errorf("GET %s (If-None-Match %s): %d, want %d", c.path, c.inm, w.Code, c.status)
			continue
		}
		if c.status == 404 {
			continue
		}
		if got := w.Header().Get("Cache-Control"); got != c.cache {
			t.Errorf("GET %s: Cache-Control %q, want %q", c.path, got, c.cache)
		}
		if w.Header().Get("ETag") == "" {
			t.Errorf("GET %s: no ETag", c.path)
		}
		if c.ctype != "" && w.Header().Get("Content-Type") != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, w.Header().Get("Content-Type"), c.ctype)
		}
		if c.status == 304 && w.Body.Len() != 0 {
			t.Errorf("GET %s: 304 with a body", c.path)
		}
	}
}

// TestEmbeddedSite: the embedded pages load, and every asset they reference exists.
func TestEmbeddedSite(t *testing.T) {
	srv := New(Config{})
	for _, p := range []string{"/", "/admin"} {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		if w.Code != 200 {
			t.Fatalf("GET %s: %d", p, w.Code)
		}
		body := w.Body.String()
		for rest := body; ; {
			i := strings.Index(rest, `"/assets/`)
			if i < 0 {
				break
			}
			rest = rest[i+1:]
			ref := rest[:strings.IndexByte(rest, '"')]
			if !strings.Contains(ref, "?v=") {
				t.Errorf("%s references %s, which is not embedded", p, ref)
				continue
			}
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", ref, nil))
			if w.Code != 200 || w.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" {
				t.Errorf("%s references %s: %d %s", p, ref, w.Code, w.Header().Get("Cache-Control"))
			}
		}
	}
}
