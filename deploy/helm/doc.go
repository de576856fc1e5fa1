// Package helmchart holds the test of the Helm chart in deploy/helm/queuebox: it renders the
// chart with Helm's Go library for the default values and for every option, decodes every
// object strictly into the Kubernetes and prometheus-operator types, and holds the probes,
// ports, user, file system and capture volume to the facts of local/Dockerfile. It is its own
// module, so that the service module does not depend on Helm or the Kubernetes API types.
package helmchart
