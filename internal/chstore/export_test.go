package chstore

// TTLStatements exposes the modern retention statements to tests.
var TTLStatements = ttlStatements
