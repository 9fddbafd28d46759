// Package deploy holds deployment assets (Grafana provisioning) and the test
// that validates docker-compose.yml without a Docker engine.
package deploy
