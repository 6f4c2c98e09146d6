// Command kstatus prints the status that kstatus (sigs.k8s.io/cli-utils), the library
// behind `flux wait`-style health checks and kpt, computes for each object of the JSON
// object or list on stdin: one line "name<TAB>status<TAB>message" per object. Built
// from the Go module proxy for Tickwork's tests; see hack/README.md.
package main

import (
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	// Whole numbers as int64, as the API machinery reads them (kstatus wants them so).
	var document map[string]interface{}
	if err := json.Unmarshal(raw, &document); err != nil {
		fail(err)
	}
	items := []interface{}{document}
	if listed, ok := document["items"].([]interface{}); ok {
		items = listed
	}
	for _, item := range items {
		object, ok := item.(map[string]interface{})
		if !ok {
			fail(fmt.Errorf("not an object: %v", item))
		}
		resource := &unstructured.Unstructured{Object: object}
		result, err := status.Compute(resource)
		if err != nil {
			fail(err)
		}
		fmt.Printf("%s\t%s\t%s\n", resource.GetName(), result.Status, result.Message)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kstatus:", err)
	os.Exit(1)
}
