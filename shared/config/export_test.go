package config

// SetTestConnectors sets the connector kinds that this package's tests load with
// (testComponents): connectors_test.go, an external test file, passes the real ones.
func SetTestConnectors(specs []ConnectorSpec) { testConnectors = specs }
