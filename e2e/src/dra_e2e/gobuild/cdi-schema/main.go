// cdi-schema-validate: CDI spec files against the CDI specification's JSON schema.
//
// Usage: cdi-schema-validate SPEC-FILE...
//
// The schema is the one the CDI library embeds in its schema package (the
// module's last release that ships it inside the library module). Prints each
// refused file with the schema's message to stderr and exits 1.
package main

import (
	"fmt"
	"os"

	"tags.cncf.io/container-device-interface/schema"
)

// A document the schema must refuse: it proves the builtin schema loaded
// (the package falls back to a no-op schema when it cannot).
const refused = `{"kind": "example.com/x"}`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cdi-schema-validate SPEC-FILE...")
		os.Exit(2)
	}
	builtin := schema.BuiltinSchema()
	if builtin.ValidateData([]byte(refused)) == nil {
		fmt.Fprintln(os.Stderr, "the CDI JSON schema did not load (a document without cdiVersion passed)")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		data, err := os.ReadFile(path)
		if err == nil {
			err = builtin.ValidateData(data)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}
