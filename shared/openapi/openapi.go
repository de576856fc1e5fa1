// Package openapi holds the OpenAPI 3.1 description of QueueBox's HTTP routes
// (openapi.yaml, which docs/openapi.yaml links to) and serves it as JSON at GET /openapi.json on
// the management port.
package openapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"

	"gopkg.in/yaml.v3"
)

// YAML is the description as written.
//
//go:embed openapi.yaml
var YAML []byte

// JSON returns the description converted to JSON.
func JSON() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(YAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi: parsing openapi.yaml: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: converting openapi.yaml to JSON: %w", err)
	}
	return b, nil
}

// Register mounts GET /openapi.json on mux.
func Register(mux *http.ServeMux) error {
	b, err := JSON()
	if err != nil {
		return err
	}
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	return nil
}
