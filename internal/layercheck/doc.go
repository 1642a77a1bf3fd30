// Package layercheck holds the tests that keep Kairo's layers: imports
// point down the floors of floors, only package host assembles a kernel
// (see the constructors of assemblers), and a program links only the
// stores it imports. It has no code a program uses. See
// docs/RATIONALE.md#arrows-point-down.
package layercheck
