// Package deps pins modules that packages under construction will import.
// Temporary: removed once every module is imported by real code.
package deps

import (
	_ "github.com/AfterShip/clickhouse-sql-parser/parser"
	_ "github.com/ClickHouse/clickhouse-go/v2"
	_ "github.com/chromedp/chromedp"
	_ "github.com/gin-gonic/gin"
	_ "github.com/go-pdf/fpdf"
	_ "github.com/gogo/protobuf/proto"
	_ "github.com/golang/snappy"
	_ "github.com/grafana/loki-client-go/loki"
	_ "github.com/grafana/loki/pkg/push"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
	_ "golang.org/x/crypto/bcrypt"
	_ "gopkg.in/yaml.v3"
)
