// Package deploy holds the checks of the deployment files at the repository root and in
// local/: the AWS SAM template (template.yaml), the container image (local/Dockerfile) and
// the Compose stack (local/docker-compose.yml). Its tests parse each file and check it
// against the repository and the specification: that every function's code exists and has a
// build target, that every QUEUEBOX_ variable is a documented configuration key, that the
// schedules and routes are well formed, that secrets come from Secrets Manager, and that the
// image runs as the non-root user queuebox with a health check. Docker and AWS are not
// needed to run them.
//
// It also checks the monitoring files (docs/monitoring.md): the Prometheus rules in
// prometheus/ with promtool (`promtool check rules` and `promtool test rules`; promtool comes
// from scripts/ensure-promtool.sh, and the tests fail without it), the Grafana dashboard in
// grafana/ and the CloudWatch alarms in cloudwatch/, against the metric families of
// spec/28-metrics.md, the alerts of spec/20-monitoring.md and the metrics that shared/emf
// writes.
//
// lambdazip (deploy/lambdazip) packages the functions for `make lambda`; README.md explains
// the deployment.
package deploy
