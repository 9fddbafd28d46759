package chstore

import (
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

func TestCompressionChoice(t *testing.T) {
	none, lz4 := clickhouse.CompressionNone, clickhouse.CompressionLZ4
	tests := []struct {
		mode  string
		addrs []string
		want  clickhouse.CompressionMethod
	}{
		{"auto", []string{"127.0.0.1:9000"}, none},
		{"", []string{"localhost:9000", "[::1]:9000", "127.0.0.2:9000"}, none},
		{"auto", []string{"127.0.0.1:9000", "10.0.0.5:9000"}, lz4},
		{"auto", []string{"ch.internal:9000"}, lz4},
		{"auto", []string{"localhost.evil.example:9000"}, lz4},
		{"lz4", []string{"127.0.0.1:9000"}, lz4},
		{"none", []string{"10.0.0.5:9000"}, none},
	}
	for _, tt := range tests {
		c, err := compression(tt.mode, tt.addrs)
		if err != nil || c.Method != tt.want {
			t.Errorf("compression(%q, %v) = %v, %v; want %v", tt.mode, tt.addrs, c, err, tt.want)
		}
	}
	if _, err := compression("zstd", nil); err == nil {
		t.Error("an unknown mode must be an error")
	}
}
