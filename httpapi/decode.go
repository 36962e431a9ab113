package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// DecodeStrict decodes exactly one JSON object from body into v, refusing anything but an
// object (a bare `null` would otherwise leave v as it was and pass), unknown fields and anything
// after the object. Clients that misspell a field get told instead of ignored.
func DecodeStrict(body []byte, v any) error {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return errors.New("the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}
