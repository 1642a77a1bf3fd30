package abi

// PluginTool is one tool a running plugin of kind tool declares: the plugin
// runtime lists them, and the tool registry offers each as PLUGIN.TOOL.
type PluginTool struct {
	Plugin string
	Tool
}
