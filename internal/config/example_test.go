package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// kvtrail.example.yaml must document every key, and only keys that exist.
func TestExampleConfigDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../kvtrail.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("example config is not YAML: %v", err)
	}
	example := map[string]bool{}
	flatten("", doc, example)
	want := map[string]bool{}
	keys("", reflect.TypeOf(Config{}), want)
	for k := range want {
		if !example[k] {
			t.Errorf("kvtrail.example.yaml lacks key %s", k)
		}
	}
	for k := range example {
		if !want[k] {
			t.Errorf("kvtrail.example.yaml has key %s that Config does not", k)
		}
	}
}

func flatten(prefix string, v any, out map[string]bool) {
	m, ok := v.(map[string]any)
	if !ok {
		out[prefix] = true
		return
	}
	for k, sub := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		flatten(key, sub, out)
	}
}

func keys(prefix string, t reflect.Type, out map[string]bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		k := strings.Split(f.Tag.Get("mapstructure"), ",")[0]
		if prefix != "" {
			k = prefix + "." + k
		}
		if f.Type.Kind() == reflect.Struct {
			keys(k, f.Type, out)
			continue
		}
		out[k] = true
	}
}
