"""The posture check types (OS, MAC, DOMAIN, PROCESS, PROCESS_MULTI, MFA) as data: their request bodies' aliases,
validation and stored form (``bodies``), and the semver range statements of OS checks against reported OS versions
(``os_versions``).

Pure rules shared by the posture-check kind, the posture engine and the admin CLI's model file; it imports
``controller.errors`` only.
"""
