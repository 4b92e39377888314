// Package apicheck holds the test that keeps the module's public API to
// what users call: it lists the exported identifiers of every public
// package and compares them with the allowlist in the module's api/
// directory (one file per package, as Go's own api/ check), so a new export
// (a helper only a sibling package needs, which belongs under internal/)
// fails the test until someone decides it is user API and adds it.
//
// Its other tests keep the docs in step with that API: TestDocLinks
// resolves every bracketed doc link of the module's packages,
// and TestREADMESnippets type-checks the READMEs' Go code blocks against
// the module.
package apicheck
