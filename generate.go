package surge

// Regenerate ent (client + graph/ent.graphqls) and then gqlgen, from the repository root.
//go:generate go run -mod=mod ./ent/entc.go
//go:generate go tool gqlgen
