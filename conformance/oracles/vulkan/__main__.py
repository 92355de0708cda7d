from conformance.oracles.vulkan import main

raise SystemExit(main())
