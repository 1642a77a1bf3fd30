// Package layercheck holds tests of the import graph: which packages may
// link which, so that a layer's dependencies stay what its doc says.
package layercheck
