package main

// The -cel-cost mode: upstream's compile-time cost estimate of DRA CEL selectors, the
// number the API server compares with CELSelectorExpressionMaxCost when a DeviceClass or
// ResourceClaim is created, for checking the Python estimate against it.
//
//	dra-go-allocate -cel-cost < expressions.jsonl > costs.jsonl
//
// Each input line is {"id", "expression", "consumableCapacity", "listTypeAttributes"} (the
// two feature gates that change the CEL environment); each output line is {"id",
// "maxCost"} or {"id", "error"} with the compile error as the API server words it.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type celCostCase struct {
	ID                 string `json:"id"`
	Expression         string `json:"expression"`
	ConsumableCapacity bool   `json:"consumableCapacity"`
	ListTypeAttributes bool   `json:"listTypeAttributes"`
}

type celCostResult struct {
	ID      string  `json:"id"`
	MaxCost *uint64 `json:"maxCost,omitempty"`
	Error   string  `json:"error,omitempty"`
}

func runCelCost(r io.Reader, w io.Writer) error {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(w)
	defer out.Flush()
	// The API server checks new expressions (validation of a create or a changed
	// selector), not stored ones.
	envType := environment.NewExpressions
	for scanner.Scan() {
		if len(scanner.Bytes()) == 0 {
			continue
		}
		var c celCostCase
		if err := json.Unmarshal(scanner.Bytes(), &c); err != nil {
			return fmt.Errorf("bad input line: %w", err)
		}
		compiler := dracel.GetCompiler(celCompilerFeatures(c.ConsumableCapacity, c.ListTypeAttributes))
		result := compiler.CompileCELExpression(c.Expression, dracel.Options{EnvType: &envType})
		res := celCostResult{ID: c.ID}
		if result.Error != nil {
			res.Error = result.Error.Error()
		} else {
			maxCost := result.MaxCost
			res.MaxCost = &maxCost
		}
		data, err := json.Marshal(res)
		if err != nil {
			return err
		}
		if _, err := out.Write(append(data, '\n')); err != nil {
			return err
		}
	}
	return scanner.Err()
}
