// Package model turns Gateway API objects, the ServiceImports and Services
// they reference and the EndpointSlices behind those into a normalized,
// deterministic, provider-neutral model of what the global entry point must
// serve, and into the Gateway API status that those objects imply.
//
// Build is pure: no client, no IO, no clock. The same objects in any order
// give byte-identical JSON and the same Version, so a provider can compare
// versions instead of contents. Conditions carry no lastTransitionTime: the
// controller merges them into the objects' status (keeping the time unless
// the status flips), and Programmed, which depends on the data plane, is the
// controller's to set.
package model
