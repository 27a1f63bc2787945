"""GADGET (spec 003): online scheduling of ring-all-reduce jobs with ring embedding.

``problem.py`` holds one slot's G-VNE (the jobs' ring-size gains, demands and hop
reservations; free server and link capacity).
"""
