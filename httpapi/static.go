package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"time"
)

// The static part of the storefront and the dashboard: every file of web/, read once at
// startup. Pages (/ and /admin) are revalidated on every visit (ETag, no-cache), so a new
// deployment shows at once; assets (/assets/<name>) are referenced from the pages with their
// content hash (?v=<hash>), and a request that carries the current hash is cacheable for a
// year by browsers and CDNs alike (immutable). A request with another or no hash still gets
// the asset, cacheable for a minute. Dynamic data is only ever the JSON API's.

// asset is one file of web/ with its validators.
type asset struct {
	name string
	body []byte
	etag string // strong ETag: a quoted prefix of the content's SHA-256
	hash string // the same prefix, unquoted: the ?v= of references
}

// staticSite holds web/'s files by name.
type staticSite struct {
	files map[string]*asset
}

// loadStatic reads every regular file at the top of fsys. In pages (.html), each reference to
// "/assets/<name>" of a file that exists becomes "/assets/<name>?v=<hash>"; the pages' own
// ETags are those of the rewritten bytes.
func loadStatic(fsys fs.FS) (*staticSite, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	site := &staticSite{files: map[string]*asset{}}
	var pages []*asset
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		a := &asset{name: e.Name(), body: b}
		site.files[a.name] = a
		if strings.HasSuffix(a.name, ".html") {
			pages = append(pages, a)
		} else {
			a.seal()
		}
	}
	// Longest names first, so that "/assets/app.js" is not rewritten inside "/assets/app.json".
	names := make([]string, 0, len(site.files))
	for n := range site.files {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, p := range pages {
		for _, n := range names {
			f := site.files[n]
			if f.hash == "" { // pages are not assets
				continue
			}
			ref := []byte(`"/assets/` + n + `"`)
			p.body = bytes.ReplaceAll(p.body, ref, []byte(`"/assets/`+n+`?v=`+f.hash+`"`))
		}
		p.seal()
	}
	return site, nil
}

// seal computes the validators of a's final bytes.
func (a *asset) seal() {
	sum := sha256.Sum256(a.body)
	a.hash = hex.EncodeToString(sum[:8])
	a.etag = `"` + a.hash + `"`
}

// page serves an HTML page: revalidated on every visit.
func (s *staticSite) page(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := s.files[name]
		if a == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		s.serve(w, r, a)
	})
}

// asset serves /assets/{name}: a year, immutable, when the request names the current hash.
func (s *staticSite) asset(notFound func(http.ResponseWriter, *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := s.files[r.PathValue("name")]
		if a == nil || strings.HasSuffix(a.name, ".html") {
			notFound(w, r)
			return
		}
		if v := r.URL.Query().Get("v"); v != "" && v == a.hash {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "public, max-age=60")
		}
		s.serve(w, r, a)
	})
}

// serve writes a with its ETag; http.ServeContent answers If-None-Match with 304 and HEAD
// without a body, and sets the Content-Type from the name's extension.
func (s *staticSite) serve(w http.ResponseWriter, r *http.Request, a *asset) {
	w.Header().Set("ETag", a.etag)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
}
