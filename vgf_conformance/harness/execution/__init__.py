"""One case's export and runs with its watchdog (runner), the batches that share a worker's Vulkan runs, and a hung case's end."""
